//! Row-wise schedules (the examples with reductions) decide which rows the harness device
//! stores (issue 14 item 7): the shipped scripts of tests/examples/{layernorm,rmsnorm,
//! reductions} record each core's rows and compute right; a script whose tiles ask for more
//! cores than the array has is refused; a script whose reduction herd gives a row to another
//! core than the herd that writes the row leaves that row unwritten.

mod common;

use std::path::Path;

use common::linalg_of;
use common::lowering::{compile, main_of, tilings, without_tilings};
use common::values::{bytes_bf16, bytes_f32, from_bf16, from_f32};
use npu_harness_program::{Op, Program, bf16_to_f32, f32_to_bf16};
use npu_target::NpuVersion;
use npu_toolchain::npu_transform;

/// An example's shipped schedule, with `edit` applied to its text, expanded for `target`.
fn example_schedule(example: &str, target: NpuVersion, edit: impl Fn(&str) -> String) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(example)
        .join("transform_aie2p.mlir");
    let text = edit(&std::fs::read_to_string(path).unwrap());
    npu_transform::expand::expand(&text, "transform_aie2p.mlir", Some(target))
        .unwrap()
        .text
}

/// The tiling of a `block` of rows on a herd of `cores` in a row, `per_core` rows each.
fn rows_tiling(cores: u32, block: [u32; 2], per_core: u32) -> Op {
    Op::Tiling {
        herd: [cores, 1],
        domain: block.to_vec(),
        tiles: vec![per_core, 0],
    }
}

/// A sentinel no kernel computes: an element no core writes keeps it.
const SENTINEL: f32 = -7.0;

/// Small values, exact in bf16, varied along rows and columns.
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| bf16_to_f32(f32_to_bf16(((i * 37 + seed * 11) % 23) as f32 / 8.0 - 1.0)))
        .collect()
}

/// reduce_rows over a 2-program grid (8 rows of 64 f32 each): the output and the input.
fn run_reductions(p: &Program) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = data(16 * 64, 1);
    let mut xb = bytes_f32(&x);
    let mut y = bytes_f32(&vec![SENTINEL; 16 * 64]);
    p.execute(&mut [&mut xb, &mut y]).unwrap();
    (from_f32(&y), x)
}

/// What reduce_rows computes for one program's block of `rows` rows of 64.
fn reductions_reference(block: &[f32], rows: usize) -> Vec<f32> {
    let n = 64;
    let col_sum: Vec<f32> = (0..n)
        .map(|c| (0..rows).map(|r| block[r * n + c]).sum())
        .collect();
    let mut out = Vec::new();
    for r in 0..rows {
        let row = &block[r * n..(r + 1) * n];
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        let min = row.iter().copied().fold(f32::MAX, f32::min);
        out.extend(
            row.iter()
                .zip(&col_sum)
                .map(|(x, s)| x - max + s / rows as f32 - min),
        );
    }
    out
}

#[test]
fn a_reduction_of_loaded_rows_is_followed_to_each_cores_rows() {
    // The reductions example's schedule: the column sum reads the loaded block directly, so
    // the producer of its operand is the load (before this model the schedule was not
    // followed there and the kernel was stored whole, whatever the schedule said).
    let payload = linalg_of("reduce_rows.ttir");
    for (device, target) in [("npu1", NpuVersion::Npu1), ("npu2", NpuVersion::Npu2)] {
        let p = compile(
            &payload,
            &example_schedule("reductions", target, str::to_owned),
            device,
        )
        .unwrap();
        assert_eq!(tilings(&p), [rows_tiling(4, [8, 64], 2)], "{device}");
        let (y, x) = run_reductions(&p);
        for (b, (got, block)) in y.chunks(8 * 64).zip(x.chunks(8 * 64)).enumerate() {
            for (i, (g, w)) in got.iter().zip(reductions_reference(block, 8)).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4,
                    "{device} block {b} element {i}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn one_row_per_core_of_eight_rows_does_not_fit_npu1() {
    // The reductions schedule as it was shipped (one row per core): a herd of 8 columns, which
    // npu2's array has and npu1's (4 columns) has not. Before the model followed this
    // schedule it recorded no herd and npu1 accepted it.
    let payload = linalg_of("reduce_rows.ttir");
    let one_row = |t: &str| t.replace("tile_sizes [2]", "tile_sizes [1]");
    let p = compile(
        &payload,
        &example_schedule("reductions", NpuVersion::Npu2, one_row),
        "npu2",
    )
    .unwrap();
    assert_eq!(tilings(&p), [rows_tiling(8, [8, 64], 1)]);
    let err = compile(
        &payload,
        &example_schedule("reductions", NpuVersion::Npu1, one_row),
        "npu1",
    )
    .unwrap_err();
    assert!(
        err.contains("No valid placement found.") && err.contains("Unplaced herd: herd_0"),
        "{err}"
    );
}

/// Runs a norm kernel (bf16 rows of `n`, `weights` f32 or bf16 vectors of `n`) over a
/// 2-program grid of `rows` rows each: the output.
fn run_norm(p: &Program, rows: usize, n: usize, weights: &[Vec<u8>]) -> Vec<f32> {
    let mut x = bytes_bf16(&data(2 * rows * n, 2));
    let mut y = bytes_bf16(&vec![SENTINEL; 2 * rows * n]);
    let mut ws: Vec<Vec<u8>> = weights.to_vec();
    let mut args: Vec<&mut [u8]> = vec![&mut x];
    for w in &mut ws {
        args.push(w);
    }
    args.push(&mut y);
    p.execute(&mut args).unwrap();
    from_bf16(&y)
}

#[test]
fn the_shipped_norm_schedules_give_each_core_its_rows_and_compute_right() {
    // layernorm: 4 rows of 128 per program, W and B f32; rmsnorm: 2 rows of 256, W bf16.
    let cases = [
        (
            "layernorm",
            "layernorm_rows.ttir",
            4,
            128,
            vec![bytes_f32(&data(128, 3)), bytes_f32(&data(128, 4))],
        ),
        (
            "rmsnorm",
            "rmsnorm_rows.ttir",
            2,
            256,
            vec![bytes_bf16(&data(256, 5))],
        ),
    ];
    for (example, fixture, rows, n, weights) in cases {
        let payload = linalg_of(fixture);
        for (device, target) in [("npu1", NpuVersion::Npu1), ("npu2", NpuVersion::Npu2)] {
            let p = compile(
                &payload,
                &example_schedule(example, target, str::to_owned),
                device,
            )
            .unwrap();
            assert_eq!(
                tilings(&p),
                [rows_tiling(rows as u32, [rows as u32, n as u32], 1)],
                "{example} on {device}"
            );
            // Every row is computed, by the core the schedule gives it: the kernel's result.
            let got = run_norm(&p, rows, n, &weights);
            let whole = run_norm(&without_tilings(&p), rows, n, &weights);
            assert!(got.iter().all(|v| *v != SENTINEL), "{example} on {device}");
            assert_eq!(got, whole, "{example} on {device}");
        }
    }
}

/// A row-wise schedule of rmsnorm_rows in two herds: the reduction (its result allocated in L1
/// before its loop, as a matmul's C is) tiled `reduction_rows` rows per core, then the stored
/// value's producer one row per core; everything the cores compute lives in L1 and what they
/// read from L2 is staged into L1, so mlir-air's verifiers accept it.
fn two_herd_schedule(reduction_rows: u32) -> String {
    main_of(&format!(
        "    %f = transform.structured.match ops{{[\"func.func\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %fused = transform.air.fuse_elementwise_linalg %f : (!transform.any_op) -> !transform.any_op
    %reduces = transform.structured.match ops{{[\"linalg.reduce\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %red = transform.air.transpose_reduce %reduces : (!transform.any_op) -> !transform.any_op
    %store = transform.structured.match ops{{[\"bufferization.materialize_in_destination\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %out = transform.get_producer_of_operand %store[0] : (!transform.any_op) -> !transform.any_op
    %pre = transform.get_producer_of_operand %red[0] : (!transform.any_op) -> !transform.any_op
    %fills = transform.structured.match ops{{[\"linalg.fill\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %red_buf, %red_l1 = transform.structured.bufferize_to_allocation %red
        {{memory_space = 2, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %out_buf, %out_l2 = transform.structured.bufferize_to_allocation %out
        {{memory_space = 1, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %red_tile, %red_loop = transform.structured.tile_using_forall %red
        tile_sizes [{reduction_rows}] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %pre_in, %red_loop2 = transform.structured.fuse_into_containing_op %pre into %red_loop
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %fills_in, %red_loop3 = transform.structured.fuse_into_containing_op %fills into %red_loop2
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %pre_buf, %pre_l1 = transform.structured.bufferize_to_allocation %pre_in
        {{memory_space = 2, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %fills_buf, %fills_l1 = transform.structured.bufferize_to_allocation %fills_in
        {{memory_space = 2, bufferize_destination_only, emit_dealloc}} : !transform.any_op
    %row, %out_loop = transform.structured.tile_using_forall %out tile_sizes [1]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %b = transform.bufferization.one_shot_bufferize %f : (!transform.any_op) -> !transform.any_op
    %loops = transform.structured.match ops{{[\"scf.forall\"]}} in %m
        : (!transform.any_op) -> !transform.any_op
    %in_loops = transform.structured.match
        ops{{[\"linalg.generic\", \"linalg.reduce\", \"linalg.fill\"]}} in %loops
        : (!transform.any_op) -> !transform.any_op
    %staged = transform.air.linalg_promote %in_loops {{\"memory_space\"=\"L1\"}}
        : (!transform.any_op) -> !transform.any_op
    %red_forall, %out_forall = transform.split_handle %loops
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %red_par = transform.loop.forall_to_parallel %red_forall : (!transform.any_op) -> !transform.any_op
    %red_herd = transform.air.par_to_herd %red_par : (!transform.any_op) -> !transform.any_op
    %out_par = transform.loop.forall_to_parallel %out_forall : (!transform.any_op) -> !transform.any_op
    %out_herd = transform.air.par_to_herd %out_par : (!transform.any_op) -> !transform.any_op
    %red_vec = transform.air.herd_vectorize %red_herd : (!transform.any_op) -> !transform.any_op
    %out_vec = transform.air.herd_vectorize %out_herd : (!transform.any_op) -> !transform.any_op
"
    ))
}

#[test]
fn a_reduction_herd_that_gives_a_row_to_another_core_leaves_the_row_unwritten() {
    let payload = linalg_of("rmsnorm_rows.ttir");
    let weights = [bytes_bf16(&data(256, 5))];
    // Both herds one row per core: core r reduces row r into its L1 and writes row r.
    let agree = compile(&payload, &two_herd_schedule(1), "npu2").unwrap();
    assert_eq!(
        tilings(&agree),
        [rows_tiling(2, [2, 256], 1), rows_tiling(2, [2, 256], 1)]
    );
    let right = run_norm(&agree, 2, 256, &weights);
    assert_eq!(right, run_norm(&without_tilings(&agree), 2, 256, &weights));
    assert!(right.iter().all(|v| *v != SENTINEL));
    // The reduction two rows per core: core 0 reduces both rows, but core 1 of the output
    // herd writes row 1 from its own L1, where no core put that row's sum.
    let disagree = compile(&payload, &two_herd_schedule(2), "npu2").unwrap();
    assert_eq!(
        tilings(&disagree),
        [rows_tiling(1, [2, 256], 2), rows_tiling(2, [2, 256], 1)]
    );
    let got = run_norm(&disagree, 2, 256, &weights);
    for (r, (g, w)) in got.chunks(256).zip(right.chunks(256)).enumerate() {
        if r % 2 == 0 {
            assert_eq!(g, w, "row {r}");
        } else {
            assert!(g.iter().all(|v| *v == SENTINEL), "row {r} was written");
        }
    }
}

/// The step of the shipped row-wise scripts that stages what the row loop reads into L1.
const STAGE_IN_L1: &str = "    %row_ops_l1 = transform.air.linalg_promote %row_ops {\"memory_space\"=\"L1\"}\n        \
     : (!transform.any_op) -> !transform.any_op\n";

#[test]
fn a_row_schedule_whose_cores_read_the_loaded_rows_from_l2_is_refused() {
    // Before the model judged row-wise schedules after air.transpose_reduce, the shipped
    // scripts (which had no staging step) passed; mlir-air's air.herd verifier refuses the
    // vectorized read of the L2 rows inside the herd.
    let cases = [
        ("softmax", "softmax_rows.ttir"),
        ("layernorm", "layernorm_rows.ttir"),
        ("rmsnorm", "rmsnorm_rows.ttir"),
        ("reductions", "reduce_rows.ttir"),
    ];
    for (example, fixture) in cases {
        let payload = linalg_of(fixture);
        let shipped = example_schedule(example, NpuVersion::Npu2, str::to_owned);
        assert!(shipped.contains(STAGE_IN_L1), "{example}");
        if let Err(e) = compile(&payload, &shipped, "npu2") {
            panic!("{example}: {e}");
        }
        let unstaged = example_schedule(example, NpuVersion::Npu2, |t| t.replace(STAGE_IN_L1, ""));
        let err = compile(&payload, &unstaged, "npu2").unwrap_err();
        assert!(
            err.contains(
                "'vector.transfer_read' op inside 'air.herd' accesses memref with memory_space"
            ) && err.contains("AIE core tiles can only access L1 or more local memory directly"),
            "{example}: {err}"
        );
        // Staged into L2 instead: still not the core's own memory.
        let in_l2 = example_schedule(example, NpuVersion::Npu2, |t| {
            t.replace(
                "linalg_promote %row_ops {\"memory_space\"=\"L1\"}",
                "linalg_promote %row_ops {\"memory_space\"=\"L2\"}",
            )
        });
        let err = compile(&payload, &in_l2, "npu2").unwrap_err();
        assert!(
            err.contains("inside air.herd must have memory space >= L1"),
            "{example}: {err}"
        );
    }
}

#[test]
fn a_transpose_left_to_bufferizing_allocates_l3_inside_the_herd() {
    // The column sum of the reductions example reduces a leading dimension: transpose_reduce
    // gives it a transpose into a tensor.empty, fused into the row loop. Without an L1 buffer
    // for it, one_shot_bufferize allocates it in L3 (memory space 0) inside the herd.
    let payload = linalg_of("reduce_rows.ttir");
    let generics_only = example_schedule("reductions", NpuVersion::Npu2, |t| {
        t.replace(
            "ops{[\"linalg.generic\", \"linalg.transpose\"]} in %loop3",
            "ops{[\"linalg.generic\"]} in %loop3",
        )
    });
    let err = compile(&payload, &generics_only, "npu2").unwrap_err();
    assert!(
        err.contains(
            "'memref.alloc' op memref.alloc inside air.herd must have memory space >= L1, but \
             found memory space L3"
        ) && err.contains("linalg.transpose"),
        "{err}"
    );
}

#[test]
fn a_producer_that_a_reduction_also_reads_survives_fusion() {
    // layernorm.ttir (one row of 64 per program): the mean reduces the f32 cast of the loaded
    // row, which the centring generic also reads. Elementwise fusion copies the cast into that
    // generic and keeps it for the reduction, so the layernorm schedule finds it as the
    // reduction's producer and is followed to a herd: one row of 64 split one element per
    // core asks for 64 cores, which no array has. Before, the model dropped the cast with the
    // fusion, lost the schedule there and accepted the kernel, stored whole.
    let payload = linalg_of("layernorm.ttir");
    let err = compile(
        &payload,
        &example_schedule("layernorm", NpuVersion::Npu2, str::to_owned),
        "npu2",
    )
    .unwrap_err();
    assert!(
        err.contains("No valid placement found.") && err.contains("a herd of 64 columns"),
        "{err}"
    );
}

#[test]
fn fusing_a_producer_the_loop_does_not_use_yet_is_refused() {
    // The attention schedule's loop holds the stored cast of P·V. Fusing the reductions first
    // (as the script did before) asks for producers whose only readers (the softmax chain
    // feeding P) are still outside the loop: MLIR's fuse_into_containing_op fails there.
    let payload = linalg_of("attention.ttir");
    let shipped = example_schedule("attention", NpuVersion::Npu2, str::to_owned);
    if let Err(e) = compile(&payload, &shipped, "npu2") {
        panic!("{e}");
    }
    let reductions_first = example_schedule("attention", NpuVersion::Npu2, |t| {
        t.replace(
            "fuse_into_containing_op %pv into %forall",
            "fuse_into_containing_op %red into %forall",
        )
        .replace(
            "fuse_into_containing_op %red into %loop1",
            "fuse_into_containing_op %pv into %loop1",
        )
    });
    assert_ne!(reductions_first, shipped);
    let err = compile(&payload, &reductions_first, "npu2").unwrap_err();
    assert!(
        err.contains("error: could not find next producer to fuse into container"),
        "{err}"
    );
}
