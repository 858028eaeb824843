//! Packing and inspecting a kernel of realistic size: a 1 MiB PDI and a 256 KiB instruction
//! stream. Prints `BENCH <name> <median> us` lines (median of repeated runs).

use std::hint::black_box;
use std::time::Instant;

use npu_hsaco::{Arch, Kernel, check, dump, pack, parse};

const RUNS: usize = 101;

fn blob(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn median_us(mut f: impl FnMut()) -> f64 {
    f(); // warm-up
    let mut samples: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[RUNS / 2]
}

fn main() {
    let pdi = blob(1, 1 << 20);
    let insts = blob(2, 256 << 10);
    let kernels = [Kernel::pdi_insts(
        "bench_kernel",
        &insts[..],
        &pdi[..],
        48,
        4,
    )];

    let pack_us = median_us(|| {
        black_box(pack::pack(None, Arch::Aie2p, black_box(&kernels)).expect("packs"));
    });
    println!("BENCH hsaco_pack_1MiB_pdi_256KiB_insts {pack_us:.1} us");

    let file = pack::pack(None, Arch::Aie2p, &kernels).expect("packs");
    let inspect_us = median_us(|| {
        let hsaco = parse(black_box(&file)).expect("parses");
        assert!(check(&hsaco, Arch::Aie2p, 8).accepted());
        black_box(dump(&hsaco));
    });
    println!("BENCH hsaco_inspect_1MiB_pdi_256KiB_insts {inspect_us:.1} us");

    let existing = file.clone();
    let repack_us = median_us(|| {
        black_box(pack::pack(Some(black_box(&existing)), Arch::Aie2p, &kernels).expect("packs"));
    });
    println!("BENCH hsaco_repack_existing_1MiB_pdi_256KiB_insts {repack_us:.1} us");

    let section = npu_hsaco::build_section(Arch::Aie2p, &kernels).expect("builds");
    let replace_us = median_us(|| {
        black_box(
            npu_hsaco::container::replace_section(black_box(&existing), Arch::Aie2p, &section)
                .expect("replaces"),
        );
    });
    println!("BENCH hsaco_replace_section_1MiB_pdi_256KiB_insts {replace_us:.1} us");
}
