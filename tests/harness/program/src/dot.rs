//! `tt.dot` in the device's precision, fast enough for upstream's matmul sweeps.
//!
//! Every element of the result takes its products in k order and rounds once per
//! multiply-add to the accumulator's type (README, "Precision"); nothing here changes what is
//! rounded where. What differs between the paths below is only how the host computes those
//! same roundings:
//!
//! * products exact in f32 (bf16 and f16 inputs, and f32 inputs the device rounds to bf16
//!   under `--bf16-emulation`, whose magnitudes keep every product a normal f32): `s + x·y` in
//!   f32 is the product added to `s` with one rounding, as the device does; it equals the f64
//!   sum rounded to f32 the general path takes, because rounding an exact sum of two f32
//!   values to f64 first and then to f32 gives the same f32 (f64 has more than 2·24 + 2 bits);
//! * products exact in f64 into f32 (f32 inputs): `x·y + s` in f64 rounded to f32;
//! * integers of at most 16 bits into i32: wrapping i32 arithmetic is the rounding to i32;
//! * anything else: f64 with one `mul_add` and one rounding per step.
//!
//! The first three run as a register-blocked kernel over a packed copy of B ([`blocked`]),
//! split by rows of the result over the host's cores when the dot is large; each element's
//! sum is still computed alone, in k order, so neither the blocking nor the threads change a
//! bit of it.

use std::thread;

use crate::DType;

/// The operands of one dot: `a` is `m×k`, `b` is `k×n`, `acc` is `m×n`, all row-major.
pub(crate) struct Operands<'a> {
    pub a: &'a [f64],
    pub b: &'a [f64],
    pub acc: &'a [f64],
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

/// `acc + a·b` for inputs of type `input` into an accumulator of type `out`; with
/// `bf16_emulation`, f32 inputs are first rounded to bf16 (aircc's `--bf16-emulation`).
pub(crate) fn dot(ops: &Operands<'_>, input: DType, out: DType, bf16_emulation: bool) -> Vec<f64> {
    if ops.m * ops.k * ops.n == 0 {
        return ops.acc.to_vec();
    }
    let emulate = bf16_emulation && input == DType::F32;
    // Copies only when emulation rounds the inputs (blocks of a large matmul are megabytes).
    let prep = |v: &'_ [f64]| -> Vec<f64> { v.iter().map(|x| DType::Bf16.round(*x)).collect() };
    let (a_rounded, b_rounded) = if emulate {
        (prep(ops.a), prep(ops.b))
    } else {
        (Vec::new(), Vec::new())
    };
    let (a, b) = if emulate {
        (&a_rounded[..], &b_rounded[..])
    } else {
        (ops.a, ops.b)
    };
    let shape = Shape {
        m: ops.m,
        k: ops.k,
        n: ops.n,
    };
    let to_f32 = |v: &[f64]| v.iter().map(|x| *x as f32).collect::<Vec<f32>>();
    let in_f32 = |acc: &[f64]| {
        let mut c = to_f32(acc);
        blocked::<_, _, 8>(&shape, &to_f32(a), &to_f32(b), &mut c, |s, x, y| s + x * y);
        c.into_iter().map(f64::from).collect()
    };
    // Inputs of at most 11 significant bits (bf16: 8, f16: 11) multiply exactly in f32 when
    // no product leaves f32's normal range.
    let narrow = matches!(input, DType::Bf16 | DType::F16) || emulate;
    if narrow && out == DType::F32 && products_are_normal_f32(a, b) {
        return in_f32(ops.acc);
    }
    if !input.is_float() && input.size() <= 2 && out == DType::I32 {
        // Integers of at most 16 bits into i32. While no partial sum can pass 2^24 every
        // step is exact in f32 and nothing wraps, so f32 gives the i32 sums (and is the
        // host's fastest arithmetic); else wrapping i32 arithmetic is the rounding to i32
        // of each step (a product fits i32).
        if integer_sums_fit_f32(ops.acc, a, b, ops.k) {
            return in_f32(ops.acc);
        }
        let to_i32 = |v: &[f64]| v.iter().map(|x| *x as i32).collect::<Vec<i32>>();
        let mut c = to_i32(ops.acc);
        blocked::<_, _, 8>(&shape, &to_i32(a), &to_i32(b), &mut c, |s, x, y| {
            s.wrapping_add(x * y)
        });
        return c.into_iter().map(f64::from).collect();
    }
    // A product of two floats of at most 24 significant bits (up to f32) is exact in f64, so
    // `x * y + s` rounds once, exactly as `mul_add` does, without the software fma
    // `mul_add` costs on x86-64.
    if input.is_float() && input.size() <= 4 && out == DType::F32 {
        let mut c = ops.acc.to_vec();
        blocked::<_, _, 4>(&shape, a, b, &mut c, |s, x, y| {
            f64::from((x * y + s) as f32)
        });
        return c;
    }
    let mut c = ops.acc.to_vec();
    for (crow, arow) in c.chunks_exact_mut(ops.n).zip(a.chunks_exact(ops.k)) {
        for (j, s) in crow.iter_mut().enumerate() {
            for (kk, x) in arow.iter().enumerate() {
                *s = out.round(x.mul_add(b[kk * ops.n + j], *s));
            }
        }
    }
    c
}

/// Whether every product of an element of `a` and one of `b` is a normal f32 or zero (no
/// overflow, no subnormal): then products of narrow floats are exact in f32. NaN and
/// infinities answer false.
fn products_are_normal_f32(a: &[f64], b: &[f64]) -> bool {
    let range = |v: &[f64]| {
        v.iter().try_fold((f64::INFINITY, 0f64), |(lo, hi), x| {
            let m = x.abs();
            if !m.is_finite() {
                return None;
            }
            Some(if m == 0.0 {
                (lo, hi)
            } else {
                (lo.min(m), hi.max(m))
            })
        })
    };
    let (Some((alo, ahi)), Some((blo, bhi))) = (range(a), range(b)) else {
        return false;
    };
    // An all-zero operand gives only zero products.
    if ahi == 0.0 || bhi == 0.0 {
        return true;
    }
    ahi * bhi <= f64::from(f32::MAX) && alo * blo >= f64::from(f32::MIN_POSITIVE)
}

/// Whether every partial sum of an integer dot stays within ±2^24 (where f32 holds every
/// integer): the accumulator's largest magnitude plus k of the largest products.
fn integer_sums_fit_f32(acc: &[f64], a: &[f64], b: &[f64], k: usize) -> bool {
    let largest = |v: &[f64]| v.iter().fold(0f64, |m, x| m.max(x.abs()));
    largest(acc) + k as f64 * largest(a) * largest(b) <= 2f64.powi(24)
}

struct Shape {
    m: usize,
    k: usize,
    n: usize,
}

/// Rows of the result one pass of the kernel keeps in registers.
const ROWS: usize = 4;
/// Steps of k one pass takes before the next block of rows (B's rows for them, all panels:
/// 256 KiB of f32 for 256 columns, fits a core's L2).
const DEPTH: usize = 256;
/// Multiply-adds below which one thread does the whole dot (a thread costs tens of µs).
const PARALLEL_WORK: usize = 1 << 22;

/// `c = c + a·b` with `step(s, x, y)` the device's multiply-add (one rounding), each `c[i][j]`
/// stepping through `a[i][kk]·b[kk][j]` for kk in order; `L` columns at a time (what fits
/// [`ROWS`] × `L` sums in the host's vector registers).
fn blocked<T, F, const L: usize>(shape: &Shape, a: &[T], b: &[T], c: &mut [T], step: F)
where
    T: Copy + Default + Send + Sync,
    F: Fn(T, T, T) -> T + Copy + Send + Sync,
{
    let Shape { m, k, n } = *shape;
    let panels = pack::<T, L>(b, k, n);
    let threads = if m * n * k >= PARALLEL_WORK {
        thread::available_parallelism().map_or(1, |t| t.get().min(m))
    } else {
        1
    };
    if threads <= 1 {
        rows(a, &panels, c, shape, step);
        return;
    }
    let rows_per_thread = m.div_ceil(threads);
    thread::scope(|scope| {
        for (a_part, c_part) in a
            .chunks(rows_per_thread * k)
            .zip(c.chunks_mut(rows_per_thread * n))
        {
            let panels = &panels;
            scope.spawn(move || rows(a_part, panels, c_part, shape, step));
        }
    });
}

/// B cut into panels of `L` columns, each stored k-major (`panel[kk]` holds row kk's
/// columns), the last one padded with zeros whose sums are never stored.
fn pack<T: Copy + Default, const L: usize>(b: &[T], k: usize, n: usize) -> Vec<Vec<[T; L]>> {
    (0..n.div_ceil(L))
        .map(|p| {
            let cols = p * L..((p + 1) * L).min(n);
            b.chunks_exact(n)
                .take(k)
                .map(|row| {
                    let mut lanes = [T::default(); L];
                    lanes[..cols.len()].copy_from_slice(&row[cols.clone()]);
                    lanes
                })
                .collect()
        })
        .collect()
}

/// The rows of `c` (and of `a`, `k` wide) given, against every panel of B, [`DEPTH`] steps
/// of k at a time: each sum is stored after one stretch of k and picked up again for the
/// next (the same value, so the same sums), which keeps the stretch of B all panels read in
/// the host's cache instead of streaming all of B once per block of rows.
fn rows<T, F, const L: usize>(a: &[T], panels: &[Vec<[T; L]>], c: &mut [T], shape: &Shape, step: F)
where
    T: Copy + Default,
    F: Fn(T, T, T) -> T + Copy,
{
    let (k, n) = (shape.k, shape.n);
    for start in (0..k).step_by(DEPTH) {
        let depth = start..(start + DEPTH).min(k);
        let mut a_blocks = a.chunks_exact(ROWS * k);
        let mut c_blocks = c.chunks_exact_mut(ROWS * n);
        for (a_block, c_block) in (&mut a_blocks).zip(&mut c_blocks) {
            tile::<T, F, ROWS, L>(a_block, panels, c_block, shape, depth.clone(), step);
        }
        for (a_row, c_row) in a_blocks
            .remainder()
            .chunks_exact(k)
            .zip(c_blocks.into_remainder().chunks_exact_mut(n))
        {
            tile::<T, F, 1, L>(a_row, panels, c_row, shape, depth.clone(), step);
        }
    }
}

/// `R` rows of the result, `L` columns at a time, their sums held in registers over the
/// steps `depth` of k.
fn tile<T, F, const R: usize, const L: usize>(
    a: &[T],
    panels: &[Vec<[T; L]>],
    c: &mut [T],
    shape: &Shape,
    depth: std::ops::Range<usize>,
    step: F,
) where
    T: Copy + Default,
    F: Fn(T, T, T) -> T + Copy,
{
    let (k, n) = (shape.k, shape.n);
    // A's rows transposed to k-major, so one step reads its R inputs together.
    let a_columns: Vec<[T; R]> = depth
        .clone()
        .map(|kk| std::array::from_fn(|r| a[r * k + kk]))
        .collect();
    for (p, panel) in panels.iter().enumerate() {
        let cols = p * L..((p + 1) * L).min(n);
        let mut sums = [[T::default(); L]; R];
        for (r, s) in sums.iter_mut().enumerate() {
            s[..cols.len()].copy_from_slice(&c[r * n + cols.start..r * n + cols.end]);
        }
        steps(&a_columns, &panel[depth.clone()], &mut sums, step);
        for (r, s) in sums.iter().enumerate() {
            c[r * n + cols.start..r * n + cols.end].copy_from_slice(&s[..cols.len()]);
        }
    }
}

/// The sums of `R` rows × `L` columns through every step of k. Kept apart (and written with
/// indices over fixed sizes) so that the compiler holds the sums in vector registers.
#[inline(never)]
fn steps<T, F, const R: usize, const L: usize>(
    a_columns: &[[T; R]],
    panel: &[[T; L]],
    sums: &mut [[T; L]; R],
    step: F,
) where
    T: Copy,
    F: Fn(T, T, T) -> T + Copy,
{
    let mut s = *sums;
    for (xs, ys) in a_columns.iter().zip(panel) {
        for r in 0..R {
            let x = xs[r];
            for l in 0..L {
                s[r][l] = step(s[r][l], x, ys[l]);
            }
        }
    }
    *sums = s;
}
