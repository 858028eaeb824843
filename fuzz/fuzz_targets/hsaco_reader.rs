//! The hsaco reader, the loader-rule check, the dumper and section replacement on arbitrary
//! bytes: none may panic, a file that takes a new section must read back with it, and a file
//! the packer writes into them must pass the loader check (the packer refuses what the check
//! refuses).
#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_hsaco::{Arch, check, check_bytes, container, dump, parse};

fuzz_target!(|data: &[u8]| {
    if let Ok(hsaco) = parse(data) {
        let _ = dump(&hsaco);
        for arch in Arch::ALL {
            let _ = check(&hsaco, arch, 8).to_string();
        }
    }
    let _ = check_bytes(data, Arch::Aie2p, 4);
    let section = npu_hsaco::section::build_section_with(
        Arch::Aie2,
        &[],
        npu_hsaco::section::Validation::Format,
    )
    .expect("an empty table builds");
    if let Ok(updated) = container::replace_section(data, Arch::Aie2, &section) {
        let reread = parse(&updated).expect("an updated container parses");
        let s = reread
            .section(Arch::Aie2)
            .expect("the new section is there");
        assert_eq!(reread.container.raw_data(s.index), Some(&section[..]));
    }
    let insts = [0x5Au8; 16];
    let kernel = npu_hsaco::Kernel::pdi_insts("k", &insts[..], &b"PDI"[..], 32, 1);
    if let Ok(packed) = npu_hsaco::pack::pack(Some(data), Arch::Aie2p, &[kernel]) {
        let report = check_bytes(&packed, Arch::Aie2p, 8);
        assert!(report.accepted(), "{report}");
    }
});
