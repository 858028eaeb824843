//! How fast the harness device runs upstream's matmul examples.
//!
//! `cargo bench -p npu-harness-program --bench matmul` prints `BENCH` lines: the seconds one
//! dispatch of the program the stand-in toolchain makes of upstream's `bare_matmul` takes
//! (median of a few runs; [`samples::matmul`]), and the multiply-adds per second that gives.
//! Upstream's `matmul_bf16_m64_n64_k64` and `matmul_i8_m128_n64_k64` sweep these kernels up to
//! 4096×4096×4096 and 4096×2048×1024, so their running time on the harness is about their
//! multiply-adds divided by these rates.

use std::hint::black_box;
use std::time::Instant;

use npu_harness_program::{DType, Program, samples};

const ROUNDS: usize = 3;

fn bench(name: &str, input: DType, acc: DType, mnk: [u32; 3], block: [u32; 2], herd: [u32; 2]) {
    let text = samples::matmul(input.name(), acc.name(), mnk, block, herd);
    let program = Program::parse_text(&text).expect("the sample parses");
    let [m, n, k] = mnk.map(|d| d as usize);
    // As upstream fills A and B: `randn` (here multiples of 1/3 up to ±8), `randint(-8, 8)`.
    let scale = if input.is_float() { 1.0 / 3.0 } else { 1.0 };
    let mut a = samples::bytes(input, &samples::values(input, m * k, 1, 8, scale));
    let mut b = samples::bytes(input, &samples::values(input, k * n, 2, 8, scale));
    let mut c = vec![0u8; m * n * acc.size()];
    let mut seconds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            program
                .execute(&mut [&mut a, &mut b, &mut c])
                .expect("the matmul runs");
            black_box(&c);
            start.elapsed().as_secs_f64()
        })
        .collect();
    seconds.sort_by(f64::total_cmp);
    let median = seconds[ROUNDS / 2];
    let macs = (m * n * k) as f64;
    println!(
        "BENCH harness_matmul_{name} {median:.3} s ({:.2} G multiply-adds/s; min {:.3}, max {:.3})",
        macs / median / 1e9,
        seconds[0],
        seconds[ROUNDS - 1]
    );
}

/// (name, input, accumulator, M N K, block M N, herd columns rows).
type Case = (&'static str, DType, DType, [u32; 3], [u32; 2], [u32; 2]);

/// Upstream's examples' kernels at sizes of their sweeps.
const CASES: [Case; 4] = [
    // matmul_bf16_m64_n64_k64: 256×256 tiles of C, a 4×4 herd of 64×64 tiles.
    (
        "bf16_1024",
        DType::Bf16,
        DType::F32,
        [1024; 3],
        [256, 256],
        [4, 4],
    ),
    // The same with the sweep's largest K: fewer, longer dots.
    (
        "bf16_512x512x4096",
        DType::Bf16,
        DType::F32,
        [512, 512, 4096],
        [256, 256],
        [4, 4],
    ),
    // matmul_i8_m128_n64_k64: 1024×256 tiles of C, an 8×4 herd of 128×64 tiles.
    (
        "i8_2048x1024x1024",
        DType::I8,
        DType::I32,
        [2048, 1024, 1024],
        [1024, 256],
        [8, 4],
    ),
    // f32 inputs without bf16 emulation: products need f64.
    (
        "f32_512",
        DType::F32,
        DType::F32,
        [512; 3],
        [256, 256],
        [4, 4],
    ),
];

fn main() {
    for (name, input, acc, mnk, block, herd) in CASES {
        bench(name, input, acc, mnk, block, herd);
    }
}
