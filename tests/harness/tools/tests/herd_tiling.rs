//! What the transform schedule says decides how the harness device runs the kernel
//! (issue 14 item 7): air-opt records the herd the schedule made and the tiles its cores
//! compute (`npu_harness.herd`), `air-par-to-launch` writes them into the launch's program
//! (`tiling COLS ROWS [bounds] [tiles]`), aircc places the herd on the target's array as the
//! real aircc does (a herd wider or taller than the array is refused), and the device stores
//! only the elements of the tiles the herd's cores compute.

mod common;

use std::path::Path;

use common::linalg_of;
use common::lowering::{compile, tiling, tilings, without_tilings};
use common::values::{from_bf16, from_f32};
use npu_harness_program::{Op, Program, bf16_to_f32, f32_to_bf16};
use npu_target::NpuVersion;
use npu_toolchain::npu_transform;

/// An elementwise schedule: fuse, flatten, result in L2, `tiling` of the generic into one
/// scf.forall, bufferize, operands into L1, herd, vectorize.
fn schedule(tiling: &str) -> String {
    format!(
        "module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%m: !transform.any_op {{transform.readonly}}) {{
    %f = transform.structured.match ops{{[\"func.func\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %fused = transform.air.fuse_elementwise_linalg %f : (!transform.any_op) -> !transform.any_op
    %g = transform.structured.match ops{{[\"linalg.generic\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %flat = transform.structured.flatten_elementwise %g : (!transform.any_op) -> !transform.any_op
    %buf, %new = transform.structured.bufferize_to_allocation %flat
        {{memory_space = 1, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %g2 = transform.structured.match ops{{[\"linalg.generic\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %tile, %forall = transform.structured.tile_using_forall %g2 {tiling}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %b = transform.bufferization.one_shot_bufferize %f : (!transform.any_op) -> !transform.any_op
    %t = transform.structured.match ops{{[\"linalg.generic\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %t_l1 = transform.air.linalg_promote %t {{\"memory_space\"=\"L1\"}}
        : (!transform.any_op) -> !transform.any_op
    %fa = transform.structured.match ops{{[\"scf.forall\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %par = transform.loop.forall_to_parallel %fa : (!transform.any_op) -> !transform.any_op
    %herd = transform.air.par_to_herd %par : (!transform.any_op) -> !transform.any_op
    %vh = transform.air.herd_vectorize %herd : (!transform.any_op) -> !transform.any_op
    transform.yield
  }}
}}
"
    )
}

/// Runs `p` over a 2-program grid of the masked 4x8 kernel (rows of 10 floats).
fn run(p: &Program) -> Vec<f32> {
    let mut x: Vec<u8> = (0..100u16)
        .flat_map(|i| f32::from(i).to_le_bytes())
        .collect();
    let mut y = vec![0u8; 400];
    p.execute(&mut [&mut x, &mut y]).unwrap();
    from_f32(&y)
}

#[test]
fn the_herd_and_its_tiles_reach_the_device() {
    // masked_2d: a 4x8 block per program, flattened to 32 elements.
    let payload = linalg_of("masked_2d.ttir");
    let p = compile(&payload, &schedule("num_threads [4]"), "npu1").unwrap();
    assert_eq!(
        tiling(&p),
        Some(Op::Tiling {
            herd: [4, 1],
            domain: vec![32],
            tiles: vec![8],
        })
    );
    let q = compile(&payload, &schedule("tile_sizes [4]"), "npu2").unwrap();
    assert_eq!(
        tiling(&q),
        Some(Op::Tiling {
            herd: [8, 1],
            domain: vec![32],
            tiles: vec![4],
        })
    );
    // Both cover the block: the same result as the kernel's own meaning.
    let mut whole = p.clone();
    whole.ops.retain(|op| !matches!(op, Op::Tiling { .. }));
    let expected = run(&whole);
    assert!(expected.iter().any(|v| *v != 0.0));
    assert_eq!(run(&p), expected);
    assert_eq!(run(&q), expected);
}

#[test]
fn a_herd_wider_than_the_array_is_refused() {
    let payload = linalg_of("masked_2d.ttir");
    // 8 columns: npu2's array, not npu1's (4 columns).
    assert!(compile(&payload, &schedule("num_threads [8]"), "npu2").is_ok());
    let err = compile(&payload, &schedule("num_threads [8]"), "npu1").unwrap_err();
    assert!(
        err.starts_with("air.mlir:0:0: error: No valid placement found.")
            && err.contains("Unplaced herd: herd_0"),
        "{err}"
    );
    // Tiles too small: 32 elements in tiles of 2 ask for a herd of 16 cores in a row.
    for device in ["npu1", "npu2"] {
        let err = compile(&payload, &schedule("tile_sizes [2]"), device).unwrap_err();
        assert!(err.contains("No valid placement found."), "{device}: {err}");
    }
}

#[test]
fn a_herd_taller_than_the_core_rows_is_refused() {
    // A 16x16 matmul tiled 4x3: a herd of 4 columns x 6 rows fits aircc's default 6 placement
    // rows, but only 4 core rows lie above row 2.
    let payload = linalg_of("matmul_bf16.ttir");
    let script = |tiles: &str| {
        format!(
            "module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%m: !transform.any_op {{transform.readonly}}) {{
    %fill = transform.structured.match ops{{[\"linalg.fill\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %c_buf, %c_new = transform.structured.bufferize_to_allocation %fill
        {{memory_space = 1, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %mm = transform.structured.match ops{{[\"linalg.matmul\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %tile, %forall = transform.structured.tile_using_forall %mm tile_sizes {tiles}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %fill_in, %loop = transform.structured.fuse_into_containing_op %fill into %forall
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %acc_buf, %acc_new = transform.structured.bufferize_to_allocation %fill_in
        {{memory_space = 2, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %f = transform.structured.match ops{{[\"func.func\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %b = transform.bufferization.one_shot_bufferize %f : (!transform.any_op) -> !transform.any_op
    %mm2 = transform.structured.match ops{{[\"linalg.matmul\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %mm_l1 = transform.air.linalg_promote %mm2 {{\"operands_to_promote\"=[0, 1]}}
        : (!transform.any_op) -> !transform.any_op
    %fa = transform.structured.match ops{{[\"scf.forall\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %par = transform.loop.forall_to_parallel %fa : (!transform.any_op) -> !transform.any_op
    %herd = transform.air.par_to_herd %par : (!transform.any_op) -> !transform.any_op
    %vh = transform.air.herd_vectorize %herd : (!transform.any_op) -> !transform.any_op
    transform.yield
  }}
}}
"
        )
    };
    let p = compile(&payload, &script("[4, 4]"), "npu1").unwrap();
    assert_eq!(
        tiling(&p),
        Some(Op::Tiling {
            herd: [4, 4],
            domain: vec![16, 16, 32],
            tiles: vec![4, 4, 0],
        })
    );
    let err = compile(&payload, &script("[4, 3]"), "npu2").unwrap_err();
    assert!(
        err.starts_with(
            "air.mlir:0:0: error: 'aie.tile' op row index (6) must be less than the number of \
             rows in the device (6)"
        ),
        "{err}"
    );
    let err = compile(&payload, &script("[4, 2]"), "npu2").unwrap_err();
    assert!(err.contains("No valid placement found."), "{err}");
}

/// The automatic matmul schedule (crates/npu-transform) for the 16x16x32 bf16 fixture on
/// `target`, expanded as air-opt gets it.
fn auto_matmul_schedule(target: NpuVersion) -> String {
    let info = npu_transform::schedule::MatmulInfo {
        m: 16,
        n: 16,
        k: 32,
        input: "bf16".into(),
        output: "f32".into(),
    };
    let params = npu_transform::schedule::matmul::params(&info, target).unwrap();
    let script = npu_transform::schedule::matmul::script(&params);
    npu_transform::expand(&script, "auto_transform.mlir", Some(target))
        .unwrap()
        .text
}

/// Runs the matmul fixture's program over a 2-program grid: C (32 rows of 32 f32, first NaN so that
/// an element no core writes back shows) from A and B of small integers.
fn run_matmul(p: &Program) -> Vec<f32> {
    let bf16s = |n: usize, seed: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v = ((i * 7 + seed) % 5) as f32 - 2.0;
                ((v.to_bits() >> 16) as u16).to_le_bytes()
            })
            .collect()
    };
    let (mut a, mut b) = (bf16s(32 * 32, 1), bf16s(32 * 32, 3));
    let mut c: Vec<u8> = (0..32 * 32).flat_map(|_| f32::NAN.to_le_bytes()).collect();
    p.execute(&mut [&mut a, &mut b, &mut c]).unwrap();
    from_f32(&c)
}

#[test]
fn the_automatic_matmul_schedule_gives_each_core_its_block_of_c() {
    let payload = linalg_of("matmul_bf16.ttir");
    // npu2: pack 8x8x8, a 2x2 herd of 8x8 blocks; npu1: pack 4x4x8, a 4x2 herd of 4x8 blocks.
    for (target, device, herd, tile) in [
        (NpuVersion::Npu2, "npu2", [2, 2], [8, 8]),
        (NpuVersion::Npu1, "npu1", [4, 2], [4, 8]),
    ] {
        let p = compile(&payload, &auto_matmul_schedule(target), device)
            .unwrap_or_else(|e| panic!("{device}: {e}"));
        // The prologue (zero C), the compute and the epilogue (write C back) herds: each
        // core owns the same block of C in all three.
        assert_eq!(
            tilings(&p),
            [
                Op::Tiling {
                    herd,
                    domain: vec![16, 16],
                    tiles: tile.to_vec(),
                },
                // The compute herd's op runs inside the K loop (l2_k = 16 per step).
                Op::Tiling {
                    herd,
                    domain: vec![16, 16, 16],
                    tiles: vec![tile[0], tile[1], 0],
                },
                Op::Tiling {
                    herd,
                    domain: vec![16, 16],
                    tiles: tile.to_vec(),
                },
            ],
            "{device}"
        );
        let expected = run_matmul(&without_tilings(&p));
        // Every program writes its 16 rows of C's first 16 columns (rows are 32 apart).
        assert!(
            expected
                .iter()
                .enumerate()
                .all(|(i, v)| v.is_finite() == (i % 32 < 16))
        );
        assert!(expected.iter().any(|v| *v != 0.0 && v.is_finite()));
        let got = run_matmul(&p);
        assert!(
            got.iter()
                .zip(&expected)
                .all(|(g, e)| g.to_bits() == e.to_bits()),
            "{device}"
        );
    }
}

#[test]
fn a_matmul_schedule_whose_herds_disagree_leaves_c_unwritten_or_is_refused() {
    let payload = linalg_of("matmul_bf16.ttir");
    let auto = auto_matmul_schedule(NpuVersion::Npu2);
    let epilogue = "tile_using_forall %write_back tile_sizes [8, 8]";
    assert!(auto.contains(epilogue), "{auto}");
    let expected = run_matmul(&without_tilings(&compile(&payload, &auto, "npu2").unwrap()));
    // The write-back in 16x8 blocks: a 1x2 herd whose core (0, j) writes rows 8-15 of its
    // block from its own L1, where the compute herd never put them (core (1, j) has them).
    let rows = auto.replace(epilogue, "tile_using_forall %write_back tile_sizes [16, 8]");
    let got = run_matmul(&compile(&payload, &rows, "npu2").unwrap());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        // C's rows are 32 apart; each program writes 16 rows of 16 columns.
        let (row, col) = (i / 32 % 16, i % 32);
        if col < 16 && row < 8 {
            assert_eq!(g, e, "element {i}");
        } else {
            assert!(g.is_nan(), "element {i} was written: {g}");
        }
    }
    assert!(expected[..16].iter().all(|v| v.is_finite()));
    // A write-back herd of one core per element (16x16) cannot be placed.
    let tiny = auto.replace(
        "tile_using_forall %write_back tile_sizes [8, 8]",
        "tile_using_forall %write_back tile_sizes [1, 1]",
    );
    let err = compile(&payload, &tiny, "npu2").unwrap_err();
    assert!(err.contains("No valid placement found."), "{err}");
}

/// The row-wise schedule of the softmax example (`air.transpose_reduce`, the stored value's
/// producer tiled `tile_sizes [1]`), with `rows` in place of that tiling, expanded for npu2.
fn row_schedule(rows: &str) -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/softmax/transform_aie2p.mlir");
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("tile_sizes [1]"));
    let text = text.replace("tile_sizes [1]", rows);
    npu_transform::expand::expand(&text, "transform_aie2p.mlir", Some(NpuVersion::Npu2))
        .unwrap()
        .text
}

/// Runs `p` over a 2-program grid of softmax_rows (four bf16 rows of 64 per program): the
/// output rows, and the input rows they should be the softmax of.
fn run_rows(p: &Program) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..8 * 64)
        .map(|i| bf16_to_f32(f32_to_bf16(((i * 37) % 23) as f32 / 8.0 - 1.0)))
        .collect();
    let mut xb: Vec<u8> = x
        .iter()
        .flat_map(|v| f32_to_bf16(*v).to_le_bytes())
        .collect();
    // A sentinel the kernel never writes: a row no core computes keeps it.
    let mut y: Vec<u8> = std::iter::repeat_n(f32_to_bf16(-7.0).to_le_bytes(), 8 * 64)
        .flatten()
        .collect();
    p.execute(&mut [&mut xb, &mut y]).unwrap();
    (from_bf16(&y), x)
}

fn softmax(row: &[f32]) -> Vec<f32> {
    let m = row.iter().copied().fold(f32::MIN, f32::max);
    let e: Vec<f32> = row.iter().map(|v| (v - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// The tiling of softmax_rows' 4x64 block on a herd of `cores` in a row, `rows` rows each.
fn rows_tiling(cores: u32, rows: u32) -> Op {
    Op::Tiling {
        herd: [cores, 1],
        domain: vec![4, 64],
        tiles: vec![rows, 0],
    }
}

#[test]
fn a_row_wise_schedule_gives_each_core_its_rows() {
    // transpose_reduce, then the stored value's producer (followed through the store) tiled
    // one row per core: a herd of 4 cores, each computing one row of the 4x64 block.
    let payload = linalg_of("softmax_rows.ttir");
    let p = compile(&payload, &row_schedule("tile_sizes [1]"), "npu2").unwrap();
    assert_eq!(tiling(&p), Some(rows_tiling(4, 1)));
    let (y, x) = run_rows(&p);
    for (r, (got, row)) in y.chunks(64).zip(x.chunks(64)).enumerate() {
        for (g, w) in got.iter().zip(softmax(row)) {
            assert!(
                (g - w).abs() <= 2e-2 * w.abs() + 1e-3,
                "row {r}: {g} vs {w}"
            );
        }
    }
    // Two rows per core: a herd of 2 that still covers the block.
    let q = compile(&payload, &row_schedule("tile_sizes [2]"), "npu2").unwrap();
    assert_eq!(tiling(&q), Some(rows_tiling(2, 2)));
    assert_eq!(run_rows(&q).0, y);
    // The same rows on a herd of 2 one-row cores: rows 2 and 3 of each block are computed by
    // no core and keep what was in memory.
    let mut short = p.clone();
    for op in &mut short.ops {
        if let Op::Tiling { herd, .. } = op {
            *herd = [2, 1];
        }
    }
    let (z, _) = run_rows(&short);
    for (r, (got, want)) in z.chunks(64).zip(y.chunks(64)).enumerate() {
        if r % 4 < 2 {
            assert_eq!(got, want, "row {r}");
        } else {
            assert!(got.iter().all(|v| *v == -7.0), "row {r} was written");
        }
    }
}

#[test]
fn a_row_wise_schedule_whose_herd_does_not_fit_its_tiles_is_refused() {
    // Rows split into 8 pieces as well: 4 columns x 8 rows of cores, more core rows than the
    // array has.
    let payload = linalg_of("softmax_rows.ttir");
    let err = compile(&payload, &row_schedule("tile_sizes [1, 8]"), "npu2").unwrap_err();
    assert!(err.contains("No valid placement found"), "{err}");
}
