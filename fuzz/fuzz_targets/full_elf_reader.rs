//! The AIE full-ELF reader on arbitrary bytes: it may refuse, never panic; what it accepts
//! packs and passes the loader check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_hsaco::{Arch, check, kernels_from_full_elf, pack, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(kernels) = kernels_from_full_elf(data, None) else {
        return;
    };
    let entries: Vec<_> = kernels
        .iter()
        .filter_map(|k| k.to_kernel(Some(0), None).ok())
        .collect();
    let Ok(file) = pack::pack(None, Arch::Aie2p, &entries) else {
        return;
    };
    let hsaco = parse(&file).expect("a packed file parses");
    let cols = entries.iter().map(|k| k.num_cols).max().unwrap_or(1);
    assert!(
        check(&hsaco, Arch::Aie2p, cols).accepted(),
        "{}",
        check(&hsaco, Arch::Aie2p, cols)
    );
});
