//! The stand-in air-opt judges the transform script as mlir-air does (real-toolchain-rules.md
//! §4): it parses and verifies it, runs `@__transform_main` once over a model of the payload,
//! and refuses what the real tools refuse, in their words — a script that is not MLIR, an
//! unresolved include, an unknown op, `forall_to_parallel` on two loops or on a loop that still
//! has shared outputs, and (at `air-par-to-launch`) the L3 allocations a schedule that
//! bufferizes before allocating leaves inside `air.segment`, and (mlir-air's `air.herd`
//! verifier) an allocation outside L1 or a vectorized access to L2/L3 memory inside a herd.
//! The product's schedules and every example script pass the same judge.

mod common;

use std::path::Path;
use std::process::Command;

use common::lowering::main_of;
use common::{AIR_OPT, linalg_of};
use npu_target::NpuVersion;
use npu_toolchain::npu_transform;

/// As the lowering runs it: loads moved to L2 first, then the script.
const OVERRIDE: &str = "builtin.module(air-resolve-tensor-opoperand-conflicts, \
                        air-override-memref-memory-space{scope=func memory-space=1})";
const TRANSFORM: &str = "builtin.module(air-transform{filename=t.mlir})";
const LAUNCH: &str = "builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=4,1,1}),\
                      air-par-to-launch{depth=0 has-air-segment=true})";

/// Runs air-opt's transform pass, then the launch passes on its output, as the lowering does.
/// Returns the stderr of the first step that fails (None when both pass).
fn lower(payload: &str, script: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.mlir"), payload).unwrap();
    std::fs::write(dir.path().join("t.mlir"), script).unwrap();
    for (input, pipeline, output) in [
        ("in.mlir", OVERRIDE, "l2.mlir"),
        ("l2.mlir", TRANSFORM, "tiled.mlir"),
        ("tiled.mlir", LAUNCH, "out.mlir"),
    ] {
        let out = Command::new(AIR_OPT)
            .args([input, &format!("--pass-pipeline={pipeline}"), "-o", output])
            .current_dir(dir.path())
            .output()
            .unwrap();
        if !out.status.success() {
            return Some(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    assert!(Path::new(&dir.path().join("out.mlir")).exists());
    None
}

const TILE: &str = "    %g = transform.structured.match ops{[\"linalg.generic\"]} in %m\n        \
                    : (!transform.any_op) -> !transform.any_op\n    \
                    %t, %loops = transform.structured.tile_using_forall %g num_threads [4]\n        \
                    : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
const FUSE: &str = "    %f = transform.structured.match ops{[\"func.func\"]} in %m\n        \
                    : (!transform.any_op) -> !transform.any_op\n    \
                    %fused = transform.air.fuse_elementwise_linalg %f\n        \
                    : (!transform.any_op) -> !transform.any_op\n";
const ALLOC_L2: &str = "    %g2 = transform.structured.match ops{[\"linalg.generic\"]} in %m\n        \
                        : (!transform.any_op) -> !transform.any_op\n    \
                        %buf, %new = transform.structured.bufferize_to_allocation %g2\n        \
                        {memory_space = 1, bufferize_destination_only, emit_dealloc} \
                        : !transform.any_op\n";
const BUFFERIZE: &str = "    %k = transform.structured.match ops{[\"func.func\"]} in %m\n        \
                         : (!transform.any_op) -> !transform.any_op\n    \
                         %b = transform.bufferization.one_shot_bufferize %k\n        \
                         : (!transform.any_op) -> !transform.any_op\n";
const TO_HERD: &str = "    %fa = transform.structured.match ops{[\"scf.forall\"]} in %m\n        \
                       : (!transform.any_op) -> !transform.any_op\n    \
                       %par = transform.loop.forall_to_parallel %fa\n        \
                       : (!transform.any_op) -> !transform.any_op\n    \
                       %herd = transform.air.par_to_herd %par\n        \
                       : (!transform.any_op) -> !transform.any_op\n";

#[test]
fn a_script_in_the_right_order_passes() {
    // axpy: two generics (x*a, then + y) as triton-shared emits them.
    let payload = linalg_of("axpy.ttir");
    let script = main_of(&[FUSE, ALLOC_L2, TILE, BUFFERIZE, TO_HERD].concat());
    assert_eq!(lower(&payload, &script), None);
}

#[test]
fn a_script_that_is_not_mlir_is_a_parse_error() {
    let err = lower(
        &linalg_of("add.ttir"),
        "tile everything by 4, then map to a herd\n",
    )
    .unwrap();
    assert_eq!(
        err.trim(),
        "t.mlir:1:1: error: custom op 'tile' is unknown (tried 'builtin.tile' as well)"
    );
    let err = lower(&linalg_of("add.ttir"), "module {\n  {\n}\n").unwrap();
    assert!(
        err.starts_with("t.mlir:2:3: error: expected operation name in quotes"),
        "{err}"
    );
}

#[test]
fn an_unresolved_include_or_an_unknown_op_is_refused() {
    let payload = linalg_of("add.ttir");
    let script = main_of(
        "    transform.include @one_shot_bufferize failures(propagate) (%m)\n        \
         : (!transform.any_op) -> ()\n",
    );
    let err = lower(&payload, &script).unwrap();
    assert_eq!(
        err.trim(),
        "t.mlir:4:5: error: 'transform.include' op does not reference a named transform sequence"
    );
    let script = main_of(
        "    %p = transform.air.forall_to_herd %m : (!transform.any_op) -> !transform.any_op\n",
    );
    let err = lower(&payload, &script).unwrap();
    assert_eq!(
        err.trim(),
        "t.mlir:4:10: error: custom op 'transform.air.forall_to_herd' is unknown"
    );
    let script = main_of("    transform.print %nothing : !transform.any_op\n");
    let err = lower(&payload, &script).unwrap();
    assert_eq!(
        err.trim(),
        "t.mlir:4:21: error: use of undeclared SSA value name"
    );
}

#[test]
fn forall_to_parallel_takes_exactly_one_bufferized_loop() {
    let payload = linalg_of("axpy.ttir");
    // Unfused: each of the two generics gets its own forall.
    let script = main_of(&[ALLOC_L2, TILE, BUFFERIZE, TO_HERD].concat());
    let err = lower(&payload, &script).unwrap();
    assert!(
        err.starts_with("t.mlir:") && err.contains(": error: expected a single payload op"),
        "{err}"
    );
    // One loop, but the IR is still on tensors: the forall has shared outputs.
    let script = main_of(&[FUSE, ALLOC_L2, TILE, TO_HERD].concat());
    let err = lower(&payload, &script).unwrap();
    assert!(
        err.contains(": error: unsupported shared outputs (didn't bufferize?)"),
        "{err}"
    );
}

#[test]
fn bufferizing_before_allocating_leaves_l3_in_the_segment() {
    let payload = linalg_of("axpy.ttir");
    // The same steps as the passing script, with bufferization before the L2 allocation.
    let script = main_of(&[FUSE, TILE, BUFFERIZE, ALLOC_L2, TO_HERD].concat());
    let err = lower(&payload, &script).unwrap();
    assert!(
        err.starts_with(
            "<unknown>:0: error: 'memref.alloc' op memref.alloc inside air.segment must have \
             memory space >= L2, but found memory space L3"
        ),
        "{err}"
    );
    assert!(err.contains("linalg.generic"), "{err}");
}

#[test]
fn the_product_schedules_pass_the_judge() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/transform/kernels");
    let mut payloads: Vec<(String, String)> = ["add.ttir", "axpy.ttir", "relu.ttir", "mul.ttir"]
        .iter()
        .map(|f| (f.to_string(), linalg_of(f)))
        .collect();
    for m in ["matmul_bf16.mlir", "matmul_f32.mlir", "matmul_i8.mlir"] {
        payloads.push((m.into(), std::fs::read_to_string(kernels.join(m)).unwrap()));
    }
    for target in [NpuVersion::Npu1, NpuVersion::Npu2] {
        for (name, payload) in &payloads {
            let linalg = npu_transform::kernel::Linalg::read(payload.clone());
            let schedule = npu_transform::schedule::choose(None, linalg.summary(), target)
                .unwrap_or_else(|e| panic!("{name} {target}: {e}"));
            assert_eq!(
                schedule.kind == npu_transform::schedule::ScheduleKind::Matmul,
                name.starts_with("matmul"),
                "{name}"
            );
            assert_eq!(
                lower(payload, schedule.script()),
                None,
                "{name} {target}:\n{}",
                schedule.script()
            );
        }
    }
}

const FLATTEN: &str = "    %fl = transform.structured.match ops{[\"linalg.generic\"]} in %m\n        \
                       : (!transform.any_op) -> !transform.any_op\n    \
                       %flat = transform.structured.flatten_elementwise %fl\n        \
                       : (!transform.any_op) -> !transform.any_op\n";
const VECTORIZE: &str = "    %h = transform.structured.match ops{[\"air.herd\"]} in %m\n        \
                         : (!transform.any_op) -> !transform.any_op\n    \
                         %vh = transform.air.herd_vectorize %h\n        \
                         : (!transform.any_op) -> !transform.any_op\n";

/// `transform.air.linalg_promote` (or another promotion) of the tiled generic's operands.
fn promote(op: &str, attrs: &str) -> String {
    format!(
        "    %tg = transform.structured.match ops{{[\"linalg.generic\"]}} in %m\n        \
         : (!transform.any_op) -> !transform.any_op\n    \
         %tg_l1 = {op} %tg {attrs}\n        : (!transform.any_op) -> !transform.any_op\n"
    )
}

/// An elementwise schedule whose tile is staged by `staging` after bufferization.
fn elementwise_with(staging: &str) -> String {
    main_of(
        &[
            FUSE, FLATTEN, ALLOC_L2, TILE, BUFFERIZE, staging, TO_HERD, VECTORIZE,
        ]
        .concat(),
    )
}

#[test]
fn a_herd_that_reads_l2_directly_is_refused() {
    let payload = linalg_of("relu.ttir");
    // The tile of the generic reads and writes the L2 block: no staging in L1.
    let err = lower(&payload, &elementwise_with("")).unwrap();
    assert!(
        err.starts_with(
            "<unknown>:0: error: 'vector.transfer_read' op inside 'air.herd' accesses memref \
             with memory_space L2; AIE core tiles can only access L1 or more local memory \
             directly. Use air.dma_memcpy_nd to stage data first."
        ),
        "{err}"
    );
    // Staging only the input leaves the write to the L2 result.
    let err = lower(
        &payload,
        &elementwise_with(&promote(
            "transform.air.linalg_promote",
            "{\"operands_to_promote\"=[0], \"memory_space\"=\"L1\"}",
        )),
    )
    .unwrap();
    assert!(
        err.starts_with(
            "<unknown>:0: error: 'vector.transfer_write' op inside 'air.herd' accesses memref \
             with memory_space L2;"
        ),
        "{err}"
    );
    // Without vectorization nothing in the herd is a direct access yet (the verifier does
    // not look at linalg ops).
    let unvectorized = main_of(&[FUSE, FLATTEN, ALLOC_L2, TILE, BUFFERIZE, TO_HERD].concat());
    assert_eq!(lower(&payload, &unvectorized), None);
}

#[test]
fn operands_promoted_to_l1_pass_the_herd_verifier() {
    let payload = linalg_of("axpy.ttir");
    for (op, attrs) in [
        ("transform.air.linalg_promote", "{\"memory_space\"=\"L1\"}"),
        ("transform.air.linalg_promote", "{}"),
        (
            "transform.air.linalg_promote",
            "{\"operands_to_promote\"=[0, 1, 2], \"memory_space\"=\"L1\"}",
        ),
        ("transform.structured.promote", "{memory_space = 2}"),
    ] {
        let script = elementwise_with(&promote(op, attrs));
        assert_eq!(lower(&payload, &script), None, "{op} {attrs}");
    }
}

#[test]
fn a_promotion_outside_l1_allocates_in_the_herd_and_is_refused() {
    let payload = linalg_of("axpy.ttir");
    for (op, attrs, space) in [
        (
            "transform.air.linalg_promote",
            "{\"memory_space\"=\"L2\"}",
            "L2",
        ),
        // upstream MLIR's promote allocates in the default memory space without one.
        (
            "transform.structured.promote",
            "{operands_to_promote = [0, 1, 2]}",
            "L3",
        ),
    ] {
        let err = lower(&payload, &elementwise_with(&promote(op, attrs))).unwrap();
        assert!(
            err.starts_with(&format!(
                "<unknown>:0: error: 'memref.alloc' op memref.alloc inside air.herd must have \
                 memory space >= L1, but found memory space {space}"
            )),
            "{op}: {err}"
        );
    }
}

#[test]
fn an_l1_tile_needs_an_l1_destination_too() {
    // A matmul tiled into a herd with its A and B tiles in L1 but its accumulator (the fill)
    // left in the L2 buffer: the vectorized matmul writes L2.
    let payload = linalg_of("matmul_bf16.ttir");
    let body = "    %fill = transform.structured.match ops{[\"linalg.fill\"]} in %m\n        \
                : (!transform.any_op) -> !transform.any_op\n    \
                %c_buf, %c_new = transform.structured.bufferize_to_allocation %fill\n        \
                {memory_space = 1, bufferize_destination_only, emit_dealloc} : !transform.any_op\n    \
                %mm = transform.structured.match ops{[\"linalg.matmul\"]} in %m\n        \
                : (!transform.any_op) -> !transform.any_op\n    \
                %tile, %forall = transform.structured.tile_using_forall %mm tile_sizes [16, 16]\n        \
                : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n    \
                %fill_in, %loop = transform.structured.fuse_into_containing_op %fill into %forall\n        \
                : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
    let acc_l1 = "    %acc_buf, %acc_new = transform.structured.bufferize_to_allocation %fill_in\n        \
                  {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op\n";
    let ab_l1 = "    %mm2 = transform.structured.match ops{[\"linalg.matmul\"]} in %m\n        \
                 : (!transform.any_op) -> !transform.any_op\n    \
                 %mm_l1 = transform.air.linalg_promote %mm2 {\"operands_to_promote\"=[0, 1], \
                 \"memory_space\"=\"L1\"}\n        : (!transform.any_op) -> !transform.any_op\n";
    let without = main_of(&[body, BUFFERIZE, ab_l1, TO_HERD, VECTORIZE].concat());
    let err = lower(&payload, &without).unwrap();
    assert!(
        err.starts_with(
            "<unknown>:0: error: 'vector.transfer_write' op inside 'air.herd' accesses memref \
             with memory_space L2;"
        ),
        "{err}"
    );
    let with = main_of(&[body, acc_l1, BUFFERIZE, ab_l1, TO_HERD, VECTORIZE].concat());
    assert_eq!(lower(&payload, &with), None);
}

/// A harness fixture with the shape of the kernel each example's scripts are written for (one
/// stored result per kernel, as the examples have). tests/python/test_examples.py runs the
/// examples' own kernels through the same judge.
const EXAMPLE_PAYLOADS: &[(&str, &str)] = &[
    ("attention", "attention.ttir"),
    ("axpy", "axpy.ttir"),
    // One conversion per kernel (casts.ttir stores four).
    ("casts", "exp_neg_f32_to_f16.ttir"),
    ("layernorm", "layernorm_rows.ttir"),
    // Its schedules are links to the other examples' scripts, judged under those.
    ("llm-blocks", ""),
    ("masked-2d", "masked_2d.ttir"),
    ("math-ops", "math_ops.ttir"),
    ("matmul-bf16", "matmul_bf16.ttir"),
    ("matmul-f32", "matmul_f32.ttir"),
    ("matmul-i8", "matmul_i8.ttir"),
    ("reductions", "reduce_rows.ttir"),
    ("relu", "relu.ttir"),
    ("rmsnorm", "rmsnorm_rows.ttir"),
    // rope stores one row per kernel; rope.ttir stores two halves, so its script is judged
    // by test_examples.py only.
    ("rope", ""),
    ("softmax", "softmax.ttir"),
    ("vec-add", "add.ttir"),
];

#[test]
fn every_example_script_passes_the_judge() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut judged = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&examples).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some((_, fixture)) = EXAMPLE_PAYLOADS.iter().find(|(e, _)| *e == name) else {
            panic!("tests/examples/{name} has no payload in EXAMPLE_PAYLOADS");
        };
        if fixture.is_empty() {
            continue;
        }
        let payload = linalg_of(fixture);
        for script in std::fs::read_dir(&dir).unwrap() {
            let path = script.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let target = match file.as_str() {
                "transform_aie2.mlir" => NpuVersion::Npu1,
                "transform_aie2p.mlir" => NpuVersion::Npu2,
                _ => continue,
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let expanded = npu_transform::expand::expand(&text, &file, Some(target))
                .unwrap_or_else(|e| panic!("{name}/{file}: {e}"));
            if let Some(err) = lower(&payload, &expanded.text) {
                failures.push(format!("{name}/{file}: {err}"));
            }
            judged += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(judged >= 20, "only {judged} example scripts found");
}

#[test]
fn independent_results_stay_separate_generics_until_their_loops_are_fused() {
    // casts.ttir stores four results computed from one load: elementwise fusion is producer
    // into consumer, so four generics (four foralls) remain.
    let payload = linalg_of("casts.ttir");
    let staging = promote("transform.air.linalg_promote", "{\"memory_space\"=\"L1\"}");
    let err = lower(&payload, &elementwise_with(&staging)).unwrap();
    assert!(
        err.contains(": error: expected a single payload op"),
        "{err}"
    );
    // Fusing the sibling loops leaves one forall for the herd.
    let siblings = "    %all = transform.structured.match ops{[\"scf.forall\"]} in %m\n        \
                    : (!transform.any_op) -> !transform.any_op\n    \
                    %l0, %l1, %l2, %l3 = transform.split_handle %all\n        \
                    : (!transform.any_op) -> (!transform.any_op, !transform.any_op, \
                    !transform.any_op, !transform.any_op)\n    \
                    %f1 = transform.loop.fuse_sibling %l1 into %l0\n        \
                    : (!transform.any_op, !transform.any_op) -> !transform.any_op\n    \
                    %f2 = transform.loop.fuse_sibling %l2 into %f1\n        \
                    : (!transform.any_op, !transform.any_op) -> !transform.any_op\n    \
                    %f3 = transform.loop.fuse_sibling %l3 into %f2\n        \
                    : (!transform.any_op, !transform.any_op) -> !transform.any_op\n";
    let script = main_of(
        &[
            FUSE, FLATTEN, ALLOC_L2, TILE, siblings, BUFFERIZE, &staging, TO_HERD, VECTORIZE,
        ]
        .concat(),
    );
    assert_eq!(lower(&payload, &script), None);
}
