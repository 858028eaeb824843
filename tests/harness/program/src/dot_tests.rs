//! `tt.dot` against the precision rule itself: every element the sum of its products in k
//! order, one rounding to the accumulator's type per multiply-add (README, "Precision"),
//! whichever way the device computes it (f32, f64 or i32 kernels, one thread or several).

use crate::samples::{self, bytes, values};
use crate::{DType, Program};

/// The rule, element by element: `c[i][j] = round(... round(round(a[i][0]·b[0][j] + 0) + ...)`,
/// each step an exact multiply-add rounded once to `acc`; f32 inputs rounded to bf16 first
/// under emulation.
fn reference(a: &[f64], b: &[f64], [m, n, k]: [usize; 3], acc: DType, emulate: bool) -> Vec<f64> {
    let prep = |x: f64| if emulate { DType::Bf16.round(x) } else { x };
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0;
            for kk in 0..k {
                let (x, y) = (prep(a[i * k + kk]), prep(b[kk * n + j]));
                s = if acc == DType::I32 {
                    // The wrapping i32 sum of exact integer products.
                    f64::from((s as i32).wrapping_add((x * y) as i32))
                } else {
                    acc.round(x.mul_add(y, s))
                };
            }
            c[i * n + j] = s;
        }
    }
    c
}

/// Runs upstream's matmul kernel as one program instance of an `m×n` tile over `a`, `b`.
fn run(input: DType, acc: DType, emulate: bool, mnk: [usize; 3], a: &[f64], b: &[f64]) -> Vec<f64> {
    let [m, n, k] = mnk;
    let text = samples::matmul(
        input.name(),
        acc.name(),
        [m as u32, n as u32, k as u32],
        [m as u32, n as u32],
        [1, 1],
    );
    let text = if emulate {
        text.replacen("args 3\n", "args 3\nbf16-emulation\n", 1)
    } else {
        text
    };
    let p = Program::parse_text(&text).unwrap();
    let (mut ab, mut bb) = (bytes(input, a), bytes(input, b));
    let mut c = vec![0u8; m * n * acc.size()];
    p.execute(&mut [&mut ab, &mut bb, &mut c]).unwrap();
    c.chunks_exact(acc.size()).map(|e| acc.read(e)).collect()
}

/// Large enough to split over threads, with rows and columns that are not whole blocks of the
/// kernel's registers.
const SHAPE: [usize; 3] = [67, 37, 1700];

#[test]
fn every_dot_kernel_sums_in_k_order_with_one_rounding_per_step() {
    let [m, n, k] = SHAPE;
    // (input, accumulator, bf16 emulation, values in -range..range times scale)
    let cases = [
        (DType::Bf16, DType::F32, false, 1000, 1.0 / 97.0),
        (DType::F16, DType::F32, false, 1000, 1.0 / 97.0),
        (DType::F32, DType::F32, true, 1000, 1.0 / 97.0),
        (DType::F32, DType::F32, false, 1000, 1.0 / 97.0),
        // Products below f32's normal range: not exact in f32, the f64 kernel computes them.
        (DType::Bf16, DType::F32, false, 1000, 1e-25),
        // Small integers: sums stay exact in f32.
        (DType::I8, DType::I32, false, 8, 1.0),
        // i8 extremes: 1700 · 2^14 passes 2^24, the i32 kernel computes them.
        (DType::I8, DType::I32, false, 128, 1.0),
        // i16 extremes: the i32 sums wrap.
        (DType::I16, DType::I32, false, 32768, 1.0),
    ];
    for (input, acc, emulate, range, scale) in cases {
        let a = values(input, m * k, 1, range, scale);
        let b = values(input, k * n, 2, range, scale);
        let got = run(input, acc, emulate, SHAPE, &a, &b);
        let want = reference(&a, &b, SHAPE, acc, emulate);
        let differ = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        assert_eq!(
            differ, 0,
            "{input:?} into {acc:?}, emulation {emulate}, range {range}·{scale}"
        );
    }
}

#[test]
fn bf16_products_beyond_f32_keep_their_exact_sums() {
    // 2^100 · 2^100 is no f32: the first step rounds to +inf, and +inf − 2^200 stays +inf.
    // Products rounded to f32 before the sum would give +inf + −inf = NaN.
    let big = 2f64.powi(100);
    let got = run(
        DType::Bf16,
        DType::F32,
        false,
        [1, 1, 2],
        &[big, -big],
        &[big, big],
    );
    assert_eq!(got, [f64::INFINITY]);
}
