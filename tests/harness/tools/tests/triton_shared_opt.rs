//! The stand-in triton-shared-opt on TTIR printed by Triton's real frontend (fixtures made by
//! `tests/fixtures/make_ttir.py` with triton 3.9.0): the programs it derives compute what the
//! kernels compute (checked here against references written out in Rust), kernels the NPU
//! could not compute are refused with the reason, and the Linalg has triton-shared's shapes.

mod common;

use std::process::{Command, Output};

use common::values::from_bf16;
use common::{TRITON_SHARED_OPT, fixture};
use npu_harness_program::{Program, bf16_to_f32, f16_to_f32, f32_to_bf16};
use npu_harness_tools::attrs::{self, Meaning};

fn run(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(TRITON_SHARED_OPT);
    cmd.args(args).envs(env.iter().copied());
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // A tool that fails before reading its input closes the pipe early: that is fine.
    match input.write_all(stdin.unwrap_or("").as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("{e}"),
        _ => {}
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn convert(name: &str) -> String {
    let out = run(
        &["--triton-to-linalg-experimental"],
        Some(&fixture(name)),
        &[],
    );
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The program of `name`, run over `grid` (as air-opt's loop bounds make it).
fn program(name: &str, grid: [u32; 3]) -> Program {
    match attrs::meaning(&convert(name)) {
        Meaning::Program(mut p) => {
            p.set_grid(grid);
            p
        }
        other => panic!("{name}: {other:?}"),
    }
}

/// Runs `name` over `grid` on the buffers.
fn exec(name: &str, grid: [u32; 3], bufs: &mut [&mut Vec<u8>]) {
    let p = program(name, grid);
    let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    p.execute(&mut views)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// Deterministic inputs in [-2, 2).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn bf16s(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| f32_to_bf16(*x).to_le_bytes())
        .collect()
}

fn bf16(x: f32) -> f32 {
    bf16_to_f32(f32_to_bf16(x))
}

fn close(got: &[f32], want: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(*g);
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

#[test]
fn elementwise_kernels_with_constexpr_sizes_compute_over_the_grid() {
    let x = values(6, 1);
    let y = values(6, 2);
    for (name, want) in [
        (
            "add_n.ttir",
            x.iter().zip(&y).map(|(a, b)| a + b).collect::<Vec<_>>(),
        ),
        (
            "axpy_n.ttir",
            x.iter().zip(&y).map(|(a, b)| 2.5 * a + b).collect(),
        ),
        ("mul_n.ttir", x.iter().zip(&y).map(|(a, b)| a * b).collect()),
    ] {
        // A grid of 4 programs of 2 (or 2 of 4) covers 8 elements; the mask keeps 6.
        let grid = if name == "mul_n.ttir" {
            [2, 1, 1]
        } else {
            [4, 1, 1]
        };
        let (mut a, mut b, mut c) = (f32s(&x), f32s(&y), f32s(&[-7.0; 7]));
        exec(name, grid, &mut [&mut a, &mut b, &mut c]);
        let got = read_f32s(&c);
        assert_eq!(got[..6], want[..], "{name}");
        assert_eq!(got[6], -7.0, "{name}: past n_elements nothing is written");
    }
    let (mut a, mut out) = (f32s(&x), f32s(&[9.0; 6]));
    exec("relu_n.ttir", [3, 1, 1], &mut [&mut a, &mut out]);
    assert_eq!(
        read_f32s(&out),
        x.iter().map(|v| v.max(0.0)).collect::<Vec<_>>()
    );
    // Too small a grid leaves the rest of the output alone: the grid is really the launch's.
    let (mut a, mut out) = (f32s(&x), f32s(&[9.0; 6]));
    exec("relu_n.ttir", [1, 1, 1], &mut [&mut a, &mut out]);
    assert_eq!(read_f32s(&out)[2..], [9.0; 4]);

    // 1000 elements in blocks of 256: the last program is partly masked.
    let (x, y) = (values(1000, 3), values(1000, 4));
    let (mut a, mut b, mut c) = (f32s(&x), f32s(&y), vec![0u8; 4000]);
    exec(
        "add_masked_constexpr.ttir",
        [4, 1, 1],
        &mut [&mut a, &mut b, &mut c],
    );
    assert_eq!(
        read_f32s(&c),
        x.iter().zip(&y).map(|(a, b)| a + b).collect::<Vec<_>>()
    );
}

fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|kk| f64::from(a[i * k + kk]) * f64::from(b[kk * n + j]))
                .sum();
        }
    }
    c
}

#[test]
fn matmuls_accumulate_in_the_accumulator_type() {
    // 32×32 by 32×32 in 16×16 tiles over a 2×2 grid of programs.
    let (a, b) = (values(32 * 32, 5), values(32 * 32, 6));
    let (ab, bb): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|x| bf16(*x)).collect(),
        b.iter().map(|x| bf16(*x)).collect(),
    );
    let want = matmul_ref(&ab, &bb, 32, 32, 32);
    let (mut ba, mut bbuf, mut c) = (bf16s(&a), bf16s(&b), vec![0u8; 32 * 32 * 4]);
    exec(
        "matmul_bf16.ttir",
        [2, 2, 1],
        &mut [&mut ba, &mut bbuf, &mut c],
    );
    close(&read_f32s(&c), &want, 1e-5, 1e-4, "bf16 matmul");

    // f32 inputs: exact products in f32; with --bf16-emulation the inputs are rounded to bf16.
    let exact = matmul_ref(&a, &b, 32, 32, 32);
    let mut p = program("matmul_f32.ttir", [2, 2, 1]);
    for (emulation, want) in [(false, &exact), (true, &want)] {
        p.bf16_emulation = emulation;
        let (mut fa, mut fb, mut c) = (f32s(&a), f32s(&b), vec![0u8; 32 * 32 * 4]);
        p.execute(&mut [&mut fa, &mut fb, &mut c]).unwrap();
        close(&read_f32s(&c), want, 1e-5, 1e-4, "f32 matmul");
    }

    // i8 inputs, i32 accumulator: no wrap-around at 8 bits.
    let ai: Vec<i8> = (0..16 * 32).map(|i| ((i * 37) % 255) as i8).collect();
    let bi: Vec<i8> = (0..32 * 16).map(|i| ((i * 91 + 7) % 255) as i8).collect();
    let mut want = vec![0i32; 16 * 16];
    for i in 0..16 {
        for j in 0..16 {
            want[i * 16 + j] = (0..32)
                .map(|k| i32::from(ai[i * 32 + k]) * i32::from(bi[k * 16 + j]))
                .sum();
        }
    }
    let (mut a8, mut b8, mut c) = (
        ai.iter().map(|v| *v as u8).collect::<Vec<_>>(),
        bi.iter().map(|v| *v as u8).collect::<Vec<_>>(),
        vec![0u8; 16 * 16 * 4],
    );
    exec("matmul_i8.ttir", [1, 1, 1], &mut [&mut a8, &mut b8, &mut c]);
    let got: Vec<i32> = c
        .chunks(4)
        .map(|w| i32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(got, want);

    // C += A·Bᵀ with the accumulator loaded from C.
    let (a, bt, c0) = (values(16 * 32, 7), values(8 * 32, 8), values(16 * 8, 9));
    let b: Vec<f32> = (0..32 * 8).map(|i| bt[(i % 8) * 32 + i / 8]).collect();
    let want: Vec<f64> = matmul_ref(&a, &b, 16, 32, 8)
        .iter()
        .zip(&c0)
        .map(|(p, c)| p + f64::from(*c))
        .collect();
    let (mut fa, mut fbt, mut c) = (f32s(&a), f32s(&bt), f32s(&c0));
    exec(
        "matmul_acc_trans.ttir",
        [1, 1, 1],
        &mut [&mut fa, &mut fbt, &mut c],
    );
    close(&read_f32s(&c), &want, 1e-5, 1e-4, "acc + a·bᵀ");
}

#[test]
fn reductions_along_each_axis() {
    let x = values(32, 10);
    let (mut xb, mut sums, mut maxes, mut mins) =
        (f32s(&x), vec![0u8; 16], vec![0u8; 32], vec![0u8; 16]);
    exec(
        "reduce_axes.ttir",
        [1, 1, 1],
        &mut [&mut xb, &mut sums, &mut maxes, &mut mins],
    );
    let row = |r: usize| &x[r * 8..r * 8 + 8];
    let want_sums: Vec<f64> = (0..4)
        .map(|r| row(r).iter().map(|v| f64::from(*v)).sum())
        .collect();
    close(&read_f32s(&sums), &want_sums, 1e-6, 1e-6, "row sums");
    let want_max: Vec<f32> = (0..8)
        .map(|c| (0..4).map(|r| x[r * 8 + c]).fold(f32::MIN, f32::max))
        .collect();
    assert_eq!(read_f32s(&maxes), want_max);
    let want_min: Vec<f32> = (0..4)
        .map(|r| row(r).iter().copied().fold(f32::MAX, f32::min))
        .collect();
    assert_eq!(read_f32s(&mins), want_min);
}

fn softmax_ref(row: &[f32]) -> Vec<f64> {
    let m = row.iter().map(|v| f64::from(*v)).fold(f64::MIN, f64::max);
    let e: Vec<f64> = row.iter().map(|v| (f64::from(*v) - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

#[test]
fn softmax_layernorm_rmsnorm_and_rope() {
    // softmax over 8 bf16 rows of 64, four rows per program.
    let x: Vec<f32> = values(8 * 64, 11).iter().map(|v| bf16(*v)).collect();
    let (mut xb, mut y) = (bf16s(&x), vec![0u8; 8 * 64 * 2]);
    exec("softmax_rows.ttir", [2, 1, 1], &mut [&mut xb, &mut y]);
    let want: Vec<f64> = x.chunks(64).flat_map(softmax_ref).collect();
    close(&from_bf16(&y), &want, 2e-2, 1e-3, "softmax");

    // layernorm of 3 bf16 rows of 64 with f32 weight and bias, bf16 out.
    let x: Vec<f32> = values(3 * 64, 12).iter().map(|v| bf16(*v)).collect();
    let (w, b) = (values(64, 13), values(64, 14));
    let (mut xb, mut wb, mut bb, mut y) = (bf16s(&x), f32s(&w), f32s(&b), vec![0u8; 3 * 64 * 2]);
    exec(
        "layernorm.ttir",
        [3, 1, 1],
        &mut [&mut xb, &mut wb, &mut bb, &mut y],
    );
    let mut want = Vec::new();
    for row in x.chunks(64) {
        let mean = row.iter().map(|v| f64::from(*v)).sum::<f64>() / 64.0;
        let var = row
            .iter()
            .map(|v| (f64::from(*v) - mean).powi(2))
            .sum::<f64>()
            / 64.0;
        for (i, v) in row.iter().enumerate() {
            want.push(
                (f64::from(*v) - mean) / (var + 1e-5).sqrt() * f64::from(w[i]) + f64::from(b[i]),
            );
        }
    }
    close(&from_bf16(&y), &want, 1e-2, 2e-2, "layernorm");

    // rmsnorm of 2 f32 rows of 64 (rsqrt).
    let x = values(2 * 64, 15);
    let w = values(64, 16);
    let (mut xb, mut wb, mut y) = (f32s(&x), f32s(&w), vec![0u8; 2 * 64 * 4]);
    exec("rmsnorm.ttir", [2, 1, 1], &mut [&mut xb, &mut wb, &mut y]);
    let mut want = Vec::new();
    for row in x.chunks(64) {
        let ms = row.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / 64.0;
        let r = 1.0 / (ms + 1e-6).sqrt();
        want.extend(
            row.iter()
                .zip(&w)
                .map(|(v, w)| f64::from(*v) * r * f64::from(*w)),
        );
    }
    close(&read_f32s(&y), &want, 1e-5, 1e-5, "rmsnorm");

    // rope over 3 rows of 16: rotate (x1, x2) halves by (cos, sin).
    let (x, c, s) = (values(48, 17), values(24, 18), values(24, 19));
    let (mut xb, mut cb, mut sb, mut y) = (f32s(&x), f32s(&c), f32s(&s), vec![0u8; 48 * 4]);
    exec(
        "rope.ttir",
        [3, 1, 1],
        &mut [&mut xb, &mut cb, &mut sb, &mut y],
    );
    let mut want = vec![0f64; 48];
    for r in 0..3 {
        for i in 0..8 {
            let (x1, x2) = (f64::from(x[r * 16 + i]), f64::from(x[r * 16 + 8 + i]));
            let (cc, ss) = (f64::from(c[r * 8 + i]), f64::from(s[r * 8 + i]));
            want[r * 16 + i] = x1 * cc - x2 * ss;
            want[r * 16 + 8 + i] = x2 * cc + x1 * ss;
        }
    }
    close(&read_f32s(&y), &want, 1e-5, 1e-5, "rope");
}

#[test]
fn causal_attention_with_two_dots_and_a_where() {
    let (h, s, d) = (2usize, 16usize, 64usize);
    let q: Vec<f32> = values(h * s * d, 20).iter().map(|v| bf16(*v)).collect();
    let k: Vec<f32> = values(h * s * d, 21).iter().map(|v| bf16(*v)).collect();
    let v: Vec<f32> = values(h * s * d, 22).iter().map(|v| bf16(*v)).collect();
    let (mut qb, mut kb, mut vb, mut o) =
        (bf16s(&q), bf16s(&k), bf16s(&v), vec![0u8; h * s * d * 2]);
    exec(
        "attention.ttir",
        [2, 1, 1],
        &mut [&mut qb, &mut kb, &mut vb, &mut o],
    );
    let mut want = vec![0f64; h * s * d];
    for hh in 0..h {
        let base = hh * s * d;
        for i in 0..s {
            let scores: Vec<f32> = (0..s)
                .map(|j| {
                    if j > i {
                        f32::NEG_INFINITY
                    } else {
                        let dot: f64 = (0..d)
                            .map(|x| {
                                f64::from(q[base + i * d + x]) * f64::from(k[base + j * d + x])
                            })
                            .sum();
                        (dot / 8.0) as f32
                    }
                })
                .collect();
            let p = softmax_ref(&scores);
            for x in 0..d {
                want[base + i * d + x] = (0..s)
                    .map(|j| f64::from(bf16(p[j] as f32)) * f64::from(v[base + j * d + x]))
                    .sum();
            }
        }
    }
    close(&from_bf16(&o), &want, 2e-2, 2e-2, "attention");
}

#[test]
fn math_ops_casts_program_ids_masks_and_gathers() {
    let x = values(64, 23);
    let (mut xb, mut y) = (f32s(&x), vec![0u8; 64 * 4]);
    exec("math_ops.ttir", [1, 1, 1], &mut [&mut xb, &mut y]);
    let want: Vec<f64> = x
        .iter()
        .map(|v| {
            let v = f64::from(*v);
            if v > 0.0 {
                v.exp2() + (v.abs() + 1.0).ln() + libm_erf(v) + 1.0 / (1.0 + (-v).exp())
            } else {
                v.abs().sqrt() + 1.0 / (v.abs() + 1.0).sqrt()
            }
        })
        .collect();
    close(&read_f32s(&y), &want, 1e-5, 1e-5, "math");

    let x: Vec<f32> = vec![
        1.5, -1.5, 2.7, -2.7, 127.9, 200.0, -300.0, 0.0, 65504.0, 1e5, 0.1, -0.49, 3.0, 7.99,
        -128.0, 40000.0,
    ];
    let (mut xb, mut y8, mut y16, mut yh, mut yb) = (
        f32s(&x),
        vec![0u8; 16],
        vec![0u8; 32],
        vec![0u8; 32],
        vec![0u8; 32],
    );
    exec(
        "casts.ttir",
        [1, 1, 1],
        &mut [&mut xb, &mut y8, &mut y16, &mut yh, &mut yb],
    );
    // Float → int truncates toward zero and saturates; i32 → i16 wraps.
    let want8: Vec<i8> = x.iter().map(|v| *v as i8).collect();
    assert_eq!(y8.iter().map(|b| *b as i8).collect::<Vec<_>>(), want8);
    let want16: Vec<i16> = x
        .iter()
        .map(|v| ((*v as i32).wrapping_mul(3)) as i16)
        .collect();
    let got16: Vec<i16> = y16
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got16, want16);
    let gothalf: Vec<f32> = yh
        .chunks(2)
        .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    assert_eq!(gothalf[0], 1.5);
    assert_eq!(gothalf[9], f32::INFINITY, "1e5 is past f16's range");
    // bf16 + 1.0 rounds in bf16: 200 + 1 = 201 (exact), 40000 + 1 stays 39936+… (8 bits).
    let wantb: Vec<f32> = x.iter().map(|v| bf16(bf16(*v) + 1.0)).collect();
    assert_eq!(from_bf16(&yb), wantb);

    // program_id used as data: program p adds p to its block of 8.
    let x = values(24, 24);
    let (mut xb, mut y) = (f32s(&x), vec![0u8; 24 * 4]);
    exec("pid_value.ttir", [3, 1, 1], &mut [&mut xb, &mut y]);
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v + (i / 8) as f32)
        .collect();
    assert_eq!(read_f32s(&y), want);

    // A 6×10 matrix in 4×8 tiles over a 2×2 grid: masked on both dimensions.
    let x = values(60, 25);
    let (mut xb, mut y) = (f32s(&x), f32s(&[5.0; 61]));
    exec("masked_2d.ttir", [2, 2, 1], &mut [&mut xb, &mut y]);
    let got = read_f32s(&y);
    assert_eq!(got[..60], x.iter().map(|v| v * 2.0).collect::<Vec<_>>()[..]);
    assert_eq!(got[60], 5.0);

    // A load through loaded indices (not structured: a generic of memref.load).
    let x = values(8, 26);
    let idx: Vec<i32> = vec![7, 0, 3, 3, 1, 6, 5, 2];
    let (mut xb, mut ib, mut y) = (
        f32s(&x),
        idx.iter().flat_map(|i| i.to_le_bytes()).collect(),
        vec![0u8; 32],
    );
    exec("gather.ttir", [1, 1, 1], &mut [&mut xb, &mut ib, &mut y]);
    assert_eq!(
        read_f32s(&y),
        idx.iter().map(|i| x[*i as usize]).collect::<Vec<_>>()
    );
}

/// erf through its series (the program crate uses libm's; this is an independent check).
fn libm_erf(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..60 {
        sum += term / f64::from(2 * n + 1);
        term *= -x * x / f64::from(n + 1);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn kernels_the_device_could_not_compute_are_refused_with_the_reason() {
    for (name, why, pointers) in [
        ("add.ttir", "scalar parameter %n_elements (i32)", 3),
        (
            "softmax.ttir",
            "%in_row_stride (i32), %out_row_stride (i32), %n_cols (i32)",
            2,
        ),
        (
            "scale_scalar.ttir",
            "scalar parameters %alpha (f32), %n_elements (i32)",
            2,
        ),
    ] {
        let linalg = convert(name);
        match attrs::meaning(&linalg) {
            Meaning::NotComputable { num_args, reason } => {
                assert_eq!(num_args, pointers, "{name}");
                assert!(
                    reason.contains(why) && reason.contains("tl.constexpr"),
                    "{name}: {reason}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(!linalg.contains(attrs::PROGRAM), "{name}");
        // The Linalg is still printed in full: the product reads it either way.
        assert!(linalg.contains("materialize_in_destination"), "{name}");
    }
}

/// The pointer parameters the Linalg writes, found as a driver would: each
/// `materialize_in_destination … in writable %x` (or `memref.store … %x[…]`) where `%x` is a
/// `memref.reinterpret_cast %argK`, possibly through `memref.subview`s.
fn written_pointer_params(linalg: &str) -> Vec<bool> {
    let sig_start = linalg.find("func.func @").unwrap();
    let sig = &linalg[sig_start..sig_start + linalg[sig_start..].find(") {").unwrap()];
    let params: Vec<&str> = sig[sig.find('(').unwrap() + 1..].split(", %").collect();
    let pointer_of_arg: Vec<Option<usize>> = {
        let mut n = 0;
        params
            .iter()
            .map(|p| {
                p.contains("memref<*x").then(|| {
                    n += 1;
                    n - 1
                })
            })
            .collect()
    };
    let mut written = vec![false; pointer_of_arg.iter().flatten().count()];
    let def_of = |name: &str| {
        linalg
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} = ")))
            .unwrap_or_else(|| panic!("nothing defines {name}"))
    };
    for line in linalg.lines() {
        let target = if let Some(at) = line.find(" in writable ") {
            line[at + 13..]
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned()
        } else if let Some(rest) = line.trim_start().strip_prefix("memref.store ") {
            rest.split(", ")
                .nth(1)
                .unwrap()
                .split('[')
                .next()
                .unwrap()
                .to_owned()
        } else {
            continue;
        };
        let mut name = target;
        loop {
            let def = def_of(&name);
            if let Some(rest) = def.split("memref.subview ").nth(1) {
                name = rest.split('[').next().unwrap().to_owned();
                continue;
            }
            let arg: usize = def
                .split("memref.reinterpret_cast %arg")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            written[pointer_of_arg[arg].expect("a pointer parameter")] = true;
            break;
        }
    }
    written
}

const COMPUTABLE: [&str; 19] = [
    "add_n.ttir",
    "mul_n.ttir",
    "relu_n.ttir",
    "axpy_n.ttir",
    "add_masked_constexpr.ttir",
    "matmul_bf16.ttir",
    "matmul_f32.ttir",
    "matmul_i8.ttir",
    "matmul_acc_trans.ttir",
    "reduce_axes.ttir",
    "softmax_rows.ttir",
    "layernorm.ttir",
    "rmsnorm.ttir",
    "rope.ttir",
    "attention.ttir",
    "math_ops.ttir",
    "casts.ttir",
    "pid_value.ttir",
    "masked_2d.ttir",
];

#[test]
fn stores_are_visible_as_materialize_in_destination() {
    for name in COMPUTABLE {
        let linalg = convert(name);
        assert_eq!(
            written_pointer_params(&linalg),
            program(name, [1, 1, 1]).written_args(),
            "{name}"
        );
    }
}

/// How many times `op` appears as an operation (not as a prefix of another name).
fn count(linalg: &str, op: &str) -> usize {
    linalg
        .match_indices(op)
        .filter(|(i, _)| {
            !linalg[i + op.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
        .count()
}

#[test]
fn the_linalg_has_triton_shareds_shapes() {
    // Unfused: `2.5 * x + y` is two generics; the constant is a filled tensor.
    let axpy = convert("axpy_n.ttir");
    assert_eq!(count(&axpy, "linalg.generic"), 2, "{axpy}");
    assert!(axpy.contains("arith.mulf") && axpy.contains("arith.addf"));
    assert_eq!(count(&axpy, "linalg.fill"), 1, "{axpy}");
    // Masked loads: a subview on both sides of the copy; the masked store through a slice.
    assert_eq!(count(&axpy, "memref.subview"), 5, "{axpy}");
    assert_eq!(count(&axpy, "tensor.extract_slice"), 1, "{axpy}");

    // A plain matmul is what upstream's matmul detection wants: fill + matmul, nothing else.
    for name in ["matmul_bf16.ttir", "matmul_f32.ttir", "matmul_i8.ttir"] {
        let mm = convert(name);
        let ops: Vec<&str> = mm
            .match_indices("linalg.")
            .map(|(i, _)| {
                mm[i + 7..]
                    .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(ops, ["fill", "matmul"], "{name}: {mm}");
    }
    let mm = convert("matmul_i8.ttir");
    assert!(
        mm.contains("linalg.matmul ins(%")
            && mm.contains(": tensor<16x32xi8>, tensor<32x16xi8>) outs(")
            && mm.contains("-> tensor<16x16xi32>"),
        "{mm}"
    );
    // acc + a·bᵀ: a transpose for the operand, the accumulator added by a generic of its own.
    let acc = convert("matmul_acc_trans.ttir");
    assert_eq!(count(&acc, "linalg.transpose"), 1, "{acc}");
    assert_eq!(count(&acc, "linalg.matmul"), 1, "{acc}");
    assert_eq!(count(&acc, "linalg.generic"), 1, "{acc}");

    // Reductions: fill + reduce; over the last axis through a transpose and dimensions = [0].
    let red = convert("reduce_axes.ttir");
    assert_eq!(count(&red, "linalg.reduce"), 3, "{red}");
    assert_eq!(count(&red, "linalg.transpose"), 2, "{red}");
    assert!(!red.contains("dimensions = [1]"), "{red}");
    assert!(
        red.contains("arith.maxnumf %in") && red.contains("arith.minnumf %in"),
        "{red}"
    );
    assert!(red.contains("0xFF800000"), "max starts from -inf: {red}");

    // tl.where is arith.select in a generic; math in generics; program ids are func args.
    let attn = convert("attention.ttir");
    assert!(attn.contains("arith.select"), "{attn}");
    assert_eq!(count(&attn, "linalg.matmul"), 2, "{attn}");
    assert!(attn.contains("math.exp"), "{attn}");
    let m = convert("math_ops.ttir");
    for op in [
        "math.exp2",
        "math.log",
        "math.erf",
        "math.sqrt",
        "math.rsqrt",
        "math.absf",
        "arith.cmpf ogt",
    ] {
        assert!(m.contains(op), "{op}: {m}");
    }
    let pid = convert("pid_value.ttir");
    assert!(pid.contains("arith.sitofp %arg5 : i32 to f32"), "{pid}");

    // A gather: a generic of memref.load over the whole buffer.
    let g = convert("gather.ttir");
    assert!(g.contains("memref.load %reinterpret_cast"), "{g}");

    // The signature: unranked memrefs, then the six trailing i32s; divisibility kept.
    let linalg = convert("add_bf16_divisibility.ttir");
    assert!(linalg.contains(
        "func.func @add_kernel(%arg0: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg1: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg2: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg3: i32 {tt.divisibility = 16 : i32}, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32)"
    ), "{linalg}");
    assert!(
        linalg.contains("arith.muli %arg7, %c256_i32 : i32"),
        "program_id x is the 4th of the trailing six: {linalg}"
    );
    assert!(linalg.contains("arith.addf %in, %in_"), "{linalg}");
}

#[test]
fn command_line_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("add.ttir");
    std::fs::write(&input, fixture("add_n.ttir")).unwrap();
    let output = dir.path().join("add.mlir");
    let log = dir.path().join("log.jsonl");
    let out = run(
        &[
            "--triton-to-linalg-experimental",
            "--mlir-print-debuginfo",
            "-o",
            output.to_str().unwrap(),
            input.to_str().unwrap(),
        ],
        None,
        &[("NPU_HARNESS_LOG", log.to_str().unwrap())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&output).unwrap();
    // Triton's location aliases around the module, each op with its TTIR op's location.
    assert!(
        text.starts_with("#loc = loc(\"") && text.contains("make_ttir.py"),
        "{text}"
    );
    assert!(text.contains("\n} loc(#loc)\n#loc1 = loc("), "{text}");
    assert!(text.contains("loc(\"x_ptr\"(#loc))"), "{text}");
    assert!(
        text.lines()
            .filter(|l| l.contains("memref.reinterpret_cast"))
            .all(|l| l.trim_end().ends_with(')') && l.contains(" loc(#loc")),
        "{text}"
    );
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(line["tool"], "triton-shared-opt");
    assert_eq!(line["argv"][1], "--triton-to-linalg-experimental");
    assert_eq!(line["argv"][5], input.to_str().unwrap());

    // No pass: the module is copied as mlir-opt would.
    let out = run(&[], Some("module {\n}\n"), &[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "module {\n}\n");

    for (args, stdin, want) in [
        (
            vec!["--bogus"],
            None,
            "triton-shared-opt: Unknown command line argument '--bogus'.  Try: '",
        ),
        (
            vec!["--triton-to-linalg-experimental", "/nonexistent.ttir"],
            None,
            "could not open input file '/nonexistent.ttir'",
        ),
        (
            vec!["--triton-to-linalg-experimental"],
            Some("module {\n}\n"),
            "expected a Triton module",
        ),
        (vec!["-o"], None, "for the -o option: requires a value!"),
    ] {
        let out = run(&args, stdin, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = run(
        &["--triton-to-linalg-experimental"],
        Some(&fixture("add_n.ttir")),
        &[("NPU_HARNESS_FAIL", "triton-shared-opt")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("injected failure"));
}
