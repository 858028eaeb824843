//! triton-npu's default schedule, for elementwise kernels (unary, binary, ternary; bf16, f32,
//! i8, i32; with masks and scalar operands), built on the transform library.
//!
//! It follows what mlir-air demands (real-toolchain-rules.md §4):
//!
//! 1. **fuse first**: triton-shared emits one `linalg.generic` per Triton operation plus
//!    `linalg.fill` for splats; `fuse_elementwise_and_canonicalize` leaves one generic per
//!    stored result, so exactly one `scf.forall` is made below (`forall_to_parallel` accepts
//!    one);
//! 2. **flatten and split per target**: `flatten_tile_forall` (npu1, 4 columns) or
//!    `flatten_tile_forall_aie2p` (npu2, 8 columns), which also gives the result its L2 buffer;
//! 3. **L1 before bufferizing**: every operand of a core's slice is padded (nofold) and given
//!    an L1 buffer with `bufferize_to_allocation {memory_space = 2}`;
//! 4. **then** `one_shot_bufferize` (no allocation is left for it to put in L3, which
//!    mlir-air's `air.segment` verifier would refuse) and its clean-up;
//! 5. 16-lane strips, then `air_herd_mapping_and_vectorize` on the single forall (herd, DMAs,
//!    vectorization);
//! 6. for bf16 kernels Triton computed in f32 (or that compare/select), the library's casts
//!    back to the bf16 vector ops the AIE offers.
//!
//! The padding values must have each operand's element type, so the schedule is generated per
//! kernel from its [`KernelSummary`]: the fused generic's inputs are the kernel's loaded tensors
//! (splat constants and scalar arguments fold into its body), its output the stored tensor.

use npu_target::NpuVersion;

use crate::kernel::{KernelSummary, element_type, tensor_shape};

/// What the default schedule is generated from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementwisePlan {
    pub target: NpuVersion,
    /// The element types of the fused generic's inputs (the loaded tensors), in order.
    pub inputs: Vec<String>,
    /// The element type of its output (the stored tensor).
    pub output: String,
    /// Cast f32 vector arithmetic back to bf16 (`cast_bf16_only_ops`).
    pub bf16_arith_casts: bool,
    /// Cast compare/select data operands to bf16 (`cast_cmpf_and_select_ops`).
    pub bf16_compare_casts: bool,
    /// Why the kernel may be outside what this schedule serves (empty when it fits).
    pub concerns: Vec<String>,
}

impl ElementwisePlan {
    /// Derives the plan from the kernel's summary.
    pub fn new(summary: &KernelSummary, target: NpuVersion) -> ElementwisePlan {
        let mut concerns = Vec::new();
        if let Some(why) = &summary.unreadable {
            concerns.push(format!("its Linalg could not be read ({why})"));
        }
        let others = summary.non_elementwise_ops();
        if !others.is_empty() {
            concerns.push(format!(
                "it is not elementwise (it has {}); give it a schedule of its own with \
                 AIR_TRANSFORM_TILING_SCRIPT",
                others
                    .iter()
                    .map(|n| format!("linalg.{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let output = match summary.stores.as_slice() {
            [one] => element_type(one).unwrap_or_else(|| "f32".into()),
            [] => {
                concerns.push("no buffer it writes could be found".into());
                "f32".into()
            }
            [first, ..] => {
                concerns.push(format!(
                    "it writes {} buffers; after fusion each result needs its own loop, and the \
                     herd mapping takes one",
                    summary.stores.len()
                ));
                element_type(first).unwrap_or_else(|| "f32".into())
            }
        };
        // Loads shaped differently from the block are broadcasts, which flattening refuses.
        let block = summary
            .loads
            .iter()
            .filter_map(|l| tensor_shape(l))
            .max_by_key(|d| d.iter().product::<u64>());
        for l in &summary.loads {
            let dims = tensor_shape(l);
            if let (Some(d), Some(b)) = (dims, &block)
                && &d != b
            {
                concerns.push(format!(
                    "it loads {l} next to blocks of {b:?}: a broadcast, which \
                     flatten_elementwise cannot collapse"
                ));
            }
        }
        let inputs: Vec<String> = summary
            .loads
            .iter()
            .map(|l| element_type(l).unwrap_or_else(|| "f32".into()))
            .collect();
        let bf16 = output == "bf16" || inputs.iter().any(|t| t == "bf16");
        let math: Vec<&String> = summary
            .op_names
            .iter()
            .filter(|n| n.starts_with("math."))
            .collect();
        if target == NpuVersion::Npu1 && !math.is_empty() {
            concerns.push(format!(
                "on npu1, {} need external functions (a schedule with \
                 air_herd_mapping_with_extern_and_vectorize and an extern_func.o)",
                math.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        ElementwisePlan {
            target,
            bf16_arith_casts: bf16 && summary.uses("arith.extf"),
            bf16_compare_casts: bf16
                && (summary.uses("arith.cmpf") || summary.uses("arith.select")),
            inputs,
            output,
            concerns,
        }
    }

    /// The library sequence that pads and promotes exactly these operands, if there is one.
    pub fn library_pad(&self) -> Option<&'static str> {
        let ins: Vec<&str> = self.inputs.iter().map(String::as_str).collect();
        Some(match (ins.as_slice(), self.output.as_str()) {
            (["bf16"], "bf16") => "pad_and_promote_unary_bf16",
            (["f32"], "bf16") => "pad_and_promote_unary_f32in_bf16out",
            (["bf16", "bf16"], "bf16") => "pad_and_promote_binary_bf16",
            (["f32", "f32"], "bf16") => "pad_and_promote_binary_f32in_bf16out",
            (["f32", "f32"], "f32") => "pad_and_promote_binary_f32",
            _ => return None,
        })
    }
}

/// `0.0 : bf16` or `0 : i8`: a zero of the element type, as a typed attribute.
fn zero_of(ty: &str) -> String {
    let is_float = ty.starts_with('f') || ty.starts_with("bf") || ty.starts_with("tf");
    if is_float {
        format!("0.0 : {ty}")
    } else {
        format!("0 : {ty}")
    }
}

/// The default schedule for `plan`, built on the transform library (expand it before use).
pub fn script(plan: &ElementwisePlan) -> String {
    let operands: Vec<&str> = plan
        .inputs
        .iter()
        .map(String::as_str)
        .chain([plan.output.as_str()])
        .collect();
    let columns = match plan.target {
        NpuVersion::Npu1 => 4,
        NpuVersion::Npu2 => 8,
    };
    let flatten = match plan.target {
        NpuVersion::Npu1 => "flatten_tile_forall",
        NpuVersion::Npu2 => "flatten_tile_forall_aie2p",
    };
    let mut s = String::new();
    s.push_str(&format!(
        "// triton-npu default schedule for an elementwise kernel (generated for this kernel).\n\
         // {} input(s) ({}) -> {}, on {} ({columns} columns).\n",
        plan.inputs.len(),
        if plan.inputs.is_empty() {
            "none".to_owned()
        } else {
            plan.inputs.join(", ")
        },
        plan.output,
        plan.target
    ));
    for c in &plan.concerns {
        s.push_str(&format!(
            "// Note: this kernel may not fit the default schedule: {c}.\n"
        ));
    }
    s.push_str(
        "module attributes {transform.with_named_sequence} {\n  \
         transform.named_sequence @__transform_main(\n      \
         %kernel_module: !transform.any_op {transform.readonly}) {\n",
    );
    let include = |s: &mut String, name: &str| {
        s.push_str(&format!(
            "    transform.include @{name} failures(propagate) (%kernel_module)\n        \
             : (!transform.any_op) -> ()\n"
        ));
    };
    s.push_str(
        "    // 1. One loop nest: fold unit dimensions, then fuse the generic of each Triton\n    \
         //    operation (and the fills of splats and scalars) into one.\n",
    );
    include(&mut s, "canonicalize_with_fold_dims");
    include(&mut s, "fuse_elementwise_and_canonicalize");
    s.push_str(&format!(
        "    // 2. Flatten, give the result an L2 buffer, and split it over the {columns} columns\n    \
         //    with one scf.forall.\n"
    ));
    include(&mut s, flatten);
    include(&mut s, "canonicalize_with_cse");
    s.push_str(
        "    // 3. Each core's slice of every operand in L1, still on tensors (before\n    \
         //    bufferization, so that nothing is left for it to allocate in L3).\n",
    );
    match plan.library_pad() {
        Some(name) => include(&mut s, name),
        None => pad_and_promote(&mut s, &operands),
    }
    include(&mut s, "canonicalize_with_cse");
    s.push_str(
        "    // 4. Bufferize now that every intermediate has its L2/L1 buffer; the forall loses its\n    \
         //    shared outputs, as forall_to_parallel requires.\n",
    );
    include(&mut s, "one_shot_bufferize");
    include(&mut s, "post_bufferize_cleanup");
    s.push_str(
        "    // 5. 16-lane strips; the single forall becomes the herd, its copies DMAs, its body\n    \
         //    vector ops.\n",
    );
    include(&mut s, "vectorize_generics_at_16");
    s.push_str(
        "    %herd = transform.include @air_herd_mapping_and_vectorize failures(propagate)\n        \
         (%kernel_module) : (!transform.any_op) -> !transform.any_op\n",
    );
    if plan.bf16_arith_casts || plan.bf16_compare_casts {
        s.push_str(
            "    // 6. Triton computed this bf16 kernel in f32: back to the bf16 vector ops the\n    \
             //    AIE has.\n",
        );
    }
    // Each cast sequence consumes the herd handle it is given.
    let mut herd_consumed = false;
    for (wanted, name) in [
        (plan.bf16_arith_casts, "cast_bf16_only_ops"),
        (plan.bf16_compare_casts, "cast_cmpf_and_select_ops"),
    ] {
        if !wanted {
            continue;
        }
        let herd = if herd_consumed {
            let again = format!("%herd_for_{name}");
            s.push_str(&format!(
                "    {again} = transform.structured.match ops{{[\"air.herd\"]}} in %kernel_module\n        \
                 : (!transform.any_op) -> !transform.any_op\n"
            ));
            again
        } else {
            "%herd".to_owned()
        };
        s.push_str(&format!(
            "    transform.include @{name} failures(propagate) ({herd})\n        \
             : (!transform.any_op) -> ()\n"
        ));
        herd_consumed = true;
    }
    s.push_str("    transform.yield\n  }\n}\n");
    s
}

/// Pads every operand of the tiled generic (nofold) and gives each an L1 buffer: the library's
/// pad_and_promote_* steps, for operand types the library has no sequence for.
fn pad_and_promote(s: &mut String, operands: &[&str]) {
    let zeros: Vec<String> = operands.iter().map(|t| zero_of(t)).collect();
    let ones = vec!["1"; operands.len()].join(", ");
    s.push_str(&format!(
        "    %slice_op = transform.structured.match ops{{[\"linalg.generic\"]}} in %kernel_module\n        \
         : (!transform.any_op) -> !transform.any_op\n    \
         %slice_padded, %slice_pads, %slice_copy_back = transform.structured.pad %slice_op {{\n        \
         padding_values = [{}],\n        \
         padding_dimensions = [0],\n        \
         nofold_flags = [{ones}],\n        \
         copy_back_op = \"linalg.copy\"\n    \
         }} : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)\n    \
         %slice_pads_dps = transform.structured.rewrite_in_destination_passing_style %slice_pads\n        \
         : (!transform.any_op) -> !transform.any_op\n",
        zeros.join(", ")
    ));
    for k in 0..operands.len() {
        s.push_str(&format!(
            "    %slice_operand_{k} = transform.get_producer_of_operand %slice_padded[{k}]\n        \
             : (!transform.any_op) -> (!transform.any_op)\n    \
             %slice_l1_{k}, %slice_l1_ops_{k} = transform.structured.bufferize_to_allocation \
             %slice_operand_{k}\n        \
             {{memory_space = 2, bufferize_destination_only, emit_dealloc}} : !transform.any_op\n"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::LinalgOp;

    /// A kernel's summary: one generic over the loads, storing one buffer.
    fn kernel(loads: &[&str], store: &str, body_ops: &[&str]) -> KernelSummary {
        let tensors: Vec<String> = loads.iter().map(|t| format!("tensor<1024x{t}>")).collect();
        KernelSummary {
            kernel: Some("k".into()),
            linalg_ops: vec![LinalgOp {
                name: "generic".into(),
                inputs: tensors.clone(),
                outputs: vec![format!("tensor<1024x{store}>")],
            }],
            loads: tensors,
            stores: vec![format!("memref<*x{store}>")],
            op_names: body_ops
                .iter()
                .map(|s| s.to_string())
                .chain(["linalg.generic".into(), "linalg.yield".into()])
                .collect(),
            unreadable: None,
        }
    }

    #[test]
    fn plans() {
        let p = ElementwisePlan::new(
            &kernel(&["f32", "f32"], "f32", &["arith.addf"]),
            NpuVersion::Npu2,
        );
        assert_eq!(
            (p.inputs.as_slice(), p.output.as_str()),
            (&["f32".to_owned(), "f32".to_owned()][..], "f32")
        );
        assert_eq!(p.library_pad(), Some("pad_and_promote_binary_f32"));
        assert!(!p.bf16_arith_casts && !p.bf16_compare_casts && p.concerns.is_empty());

        let p = ElementwisePlan::new(
            &kernel(
                &["bf16"],
                "bf16",
                &["arith.extf", "arith.cmpf", "arith.select", "arith.truncf"],
            ),
            NpuVersion::Npu1,
        );
        assert_eq!(p.library_pad(), Some("pad_and_promote_unary_bf16"));
        assert!(p.bf16_arith_casts && p.bf16_compare_casts);

        let p = ElementwisePlan::new(
            &kernel(&["i8", "i8", "i8"], "i8", &["arith.addi"]),
            NpuVersion::Npu1,
        );
        assert_eq!(p.library_pad(), None);
        let text = script(&p);
        assert!(
            text.contains("padding_values = [0 : i8, 0 : i8, 0 : i8, 0 : i8]"),
            "{text}"
        );
        assert!(
            text.contains("%slice_operand_3 = transform.get_producer_of_operand %slice_padded[3]")
        );
        assert!(!text.contains("%slice_operand_4"));
        assert!(text.contains("@flatten_tile_forall failures"));

        let p = ElementwisePlan::new(&kernel(&["f32"], "f32", &["math.exp"]), NpuVersion::Npu1);
        assert!(
            p.concerns.iter().any(|c| c.contains("math.exp")),
            "{:?}",
            p.concerns
        );
        assert!(script(&p).contains("// Note: this kernel may not fit"));
    }

    #[test]
    fn order_of_steps_obeys_mlir_air() {
        for target in [NpuVersion::Npu1, NpuVersion::Npu2] {
            for (loads, store, ops) in [
                (
                    vec!["bf16", "bf16"],
                    "bf16",
                    vec!["arith.extf", "arith.mulf", "arith.select"],
                ),
                (vec!["i32"], "i32", vec!["arith.maxsi"]),
                (
                    vec!["f32", "f32", "f32"],
                    "f32",
                    vec!["arith.mulf", "arith.addf"],
                ),
            ] {
                let text = script(&ElementwisePlan::new(&kernel(&loads, store, &ops), target));
                let at = |needle: &str| {
                    text.find(needle)
                        .unwrap_or_else(|| panic!("{needle} missing from\n{text}"))
                };
                let fuse = at("@fuse_elementwise_and_canonicalize");
                let tile = at("@flatten_tile_forall");
                let l1 = text
                    .find("@pad_and_promote")
                    .or_else(|| text.find("memory_space = 2"))
                    .unwrap();
                let bufferize = at("@one_shot_bufferize");
                let herd = at("@air_herd_mapping_and_vectorize");
                assert!(
                    fuse < tile && tile < l1 && l1 < bufferize && bufferize < herd,
                    "{text}"
                );
                assert_eq!(text.matches("@flatten_tile_forall").count(), 1);
                let want = if target == NpuVersion::Npu2 {
                    "_aie2p"
                } else {
                    " failures"
                };
                assert!(
                    text[tile + "@flatten_tile_forall".len()..].starts_with(want),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn two_casts_rematch_the_herd() {
        let p = ElementwisePlan::new(
            &kernel(&["bf16"], "bf16", &["arith.extf", "arith.cmpf"]),
            NpuVersion::Npu2,
        );
        let text = script(&p);
        assert!(
            text.contains("@cast_bf16_only_ops failures(propagate) (%herd)"),
            "{text}"
        );
        assert!(text.contains(
            "%herd_for_cast_cmpf_and_select_ops = transform.structured.match ops{[\"air.herd\"]}"
        ));
        assert!(text.contains(
            "@cast_cmpf_and_select_ops failures(propagate) (%herd_for_cast_cmpf_and_select_ops)"
        ));
        let only_compare = script(&ElementwisePlan::new(
            &kernel(&["bf16"], "bf16", &["arith.cmpf"]),
            NpuVersion::Npu2,
        ));
        assert!(only_compare.contains("@cast_cmpf_and_select_ops failures(propagate) (%herd)"));
    }

    #[test]
    fn concerns() {
        let mut s = kernel(&["f32"], "f32", &[]);
        s.stores.push("memref<*xf32>".into());
        assert!(
            ElementwisePlan::new(&s, NpuVersion::Npu2).concerns[0].contains("writes 2 buffers")
        );
        let mut s = kernel(&["f32"], "f32", &[]);
        s.loads.push("tensor<1xf32>".into());
        assert!(
            ElementwisePlan::new(&s, NpuVersion::Npu2)
                .concerns
                .iter()
                .any(|c| c.contains("broadcast"))
        );
        let mut s = kernel(&["f32"], "f32", &[]);
        s.linalg_ops[0].name = "reduce".into();
        assert!(ElementwisePlan::new(&s, NpuVersion::Npu2).concerns[0].contains("linalg.reduce"));
    }
}
