//! The xclbin (axlf) reader on arbitrary bytes: it may refuse, never panic, and a PDI it
//! returns lies inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = npu_hsaco::xclbin::partition(data) {
        let range = data.as_ptr_range();
        assert!(range.contains(&p.pdi.as_ptr()) && !p.pdi.is_empty() && p.num_cols > 0);
    }
});
