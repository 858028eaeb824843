//! The automatic matmul schedule: when a kernel is one plain matmul and no script is set,
//! upstream derives tile and pack sizes from the shapes and generates a schedule
//! (`_detect_matmul`, `_matmul_transform_params` in driver.py:1134-1244, the generator in
//! matmul_transform.py). This module follows the same rules (real-toolchain-rules.md §2) and
//! writes its own schedule with the same steps.

use npu_target::NpuVersion;

use crate::kernel::{KernelSummary, element_type, tensor_shape};

/// A plain matmul `C[MxN] = A[MxK] · B[KxN]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatmulInfo {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// The element type of A and B.
    pub input: String,
    /// The element type of C.
    pub output: String,
}

/// Upstream's detection (driver.py:1134-1164): exactly one `linalg.matmul`, no linalg op other
/// than `matmul` and `fill` (a `linalg.transpose` for a transposed operand or a generic
/// epilogue turns it off), static `ins(tensor<MxKxT>, tensor<KxNxT>) outs(tensor<MxNxU>)` with
/// consistent sizes and one input type. `Err` says why not.
pub fn detect(summary: &KernelSummary) -> Result<MatmulInfo, String> {
    if let Some(why) = &summary.unreadable {
        return Err(format!("its Linalg could not be read ({why})"));
    }
    let others: Vec<&str> = summary
        .linalg_ops
        .iter()
        .map(|o| o.name.as_str())
        .filter(|n| !matches!(*n, "matmul" | "fill"))
        .collect();
    if !others.is_empty() {
        return Err(format!(
            "it has linalg ops besides matmul and fill ({}); the automatic schedule covers one \
             plain matmul only",
            others
                .iter()
                .map(|n| format!("linalg.{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let matmuls: Vec<_> = summary
        .linalg_ops
        .iter()
        .filter(|o| o.name == "matmul")
        .collect();
    let [mm] = matmuls.as_slice() else {
        return Err(format!(
            "it has {} linalg.matmul ops, not exactly one",
            matmuls.len()
        ));
    };
    let shape =
        |ty: &str| Some((tensor_shape(ty)?, element_type(ty)?)).filter(|(d, _)| d.len() == 2);
    let (Some((a, a_ty)), Some((b, b_ty)), Some((c, c_ty))) = (
        mm.inputs.first().and_then(|t| shape(t)),
        mm.inputs.get(1).and_then(|t| shape(t)),
        mm.outputs.first().and_then(|t| shape(t)),
    ) else {
        return Err(format!(
            "the matmul's operands are not static 2-D tensors (ins {:?}, outs {:?})",
            mm.inputs, mm.outputs
        ));
    };
    let (m, k, n) = (a[0], a[1], b[1]);
    if b[0] != k || c[0] != m || c[1] != n {
        return Err(format!(
            "the matmul's shapes do not agree: A {}x{}, B {}x{}, C {}x{}",
            a[0], a[1], b[0], b[1], c[0], c[1]
        ));
    }
    if a_ty != b_ty {
        return Err(format!(
            "its inputs have different types ({a_ty} and {b_ty})"
        ));
    }
    Ok(MatmulInfo {
        m,
        n,
        k,
        input: a_ty,
        output: c_ty,
    })
}

/// Whether the kernel is a plain matmul of f32 inputs, which runs with aircc's
/// `--bf16-emulation` (AIE has no f32 MAC; upstream driver.py:2114-2128).
pub fn is_f32_matmul(summary: &KernelSummary) -> bool {
    detect(summary).is_ok_and(|info| info.input == "f32")
}

/// The schedule's parameters (upstream's `_matmul_transform_params`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatmulParams {
    pub info: MatmulInfo,
    pub target: NpuVersion,
    /// Pack sizes (M, N, K): the MAC shape of the target for the input type.
    pub pack: [u64; 3],
    /// Cores along M and N.
    pub herd: [u64; 2],
    /// The output block each core computes: `l1_m = M / herd_m`, `l1_n = N / herd_n`.
    pub l1_m: u64,
    pub l1_n: u64,
    /// The K extent of each L3→L2 copy: the largest multiple of pack_k dividing K, at most
    /// 2·pack_k.
    pub l2_k: u64,
    /// The accumulator element type of the vector contraction.
    pub accumulator: &'static str,
    /// The type the contraction's inputs are cast to, if any (bf16 for f32 data).
    pub contract_input: Option<&'static str>,
    /// Whether aircc needs `--bf16-emulation`.
    pub bf16_emulation: bool,
}

/// Derives the parameters for `target`, or says why the shape or type has no schedule.
pub fn params(info: &MatmulInfo, target: NpuVersion) -> Result<MatmulParams, String> {
    // The accumulator and input casts by input type (driver.py:1178-1189).
    let (accumulator, contract_input, bf16_emulation) = match info.input.as_str() {
        "f32" => ("f32", Some("bf16"), true),
        "bf16" => ("f32", None, false),
        // No input cast for integers: the AIE vector lowering reads each operand's signedness
        // from the extension it peels off the contraction.
        "i8" => ("i32", None, false),
        other => {
            return Err(format!(
                "its input type {other} has no automatic schedule (f32, bf16 and i8 do)"
            ));
        }
    };
    // The MAC shape (M, N, K) and how many cores the array offers along M and N
    // (driver.py:1195-1210): npu2 has an 8x8x8 MAC for every accepted type on a 4x4 herd;
    // npu1 has 4x8 x 8x4 for bf16 and 4x8 x 8x8 for i8 on a 4x2 herd.
    let (pack, cap) = match target {
        NpuVersion::Npu2 => ([8, 8, 8], [4, 4]),
        NpuVersion::Npu1 => {
            let pack_n = if info.input == "i8" { 8 } else { 4 };
            ([4, pack_n, 8], [4, 2])
        }
    };
    let [pack_m, pack_n, pack_k] = pack;
    for (dim, size, p) in [
        ("M", info.m, pack_m),
        ("N", info.n, pack_n),
        ("K", info.k, pack_k),
    ] {
        if size == 0 || size % p != 0 {
            return Err(format!(
                "{dim} = {size} is not a multiple of the {target} pack size {p} for {}",
                info.input
            ));
        }
    }
    let herd = [
        largest_divisor_at_most(info.m / pack_m, cap[0]),
        largest_divisor_at_most(info.n / pack_n, cap[1]),
    ];
    let l2_k = (1..=2)
        .rev()
        .map(|f| f * pack_k)
        .find(|&v| v <= info.k && info.k.is_multiple_of(v))
        .unwrap_or(pack_k);
    Ok(MatmulParams {
        info: info.clone(),
        target,
        pack,
        herd,
        l1_m: info.m / herd[0],
        l1_n: info.n / herd[1],
        l2_k,
        accumulator,
        contract_input,
        bf16_emulation,
    })
}

/// The largest divisor of `x` that is at most `cap` (1 at least).
fn largest_divisor_at_most(x: u64, cap: u64) -> u64 {
    (1..=cap.min(x))
        .rev()
        .find(|d| x.is_multiple_of(*d))
        .unwrap_or(1)
}

/// Lines of a generated schedule.
struct Writer {
    out: String,
}

impl Writer {
    fn line(&mut self, s: &str) {
        if s.is_empty() {
            self.out.push('\n');
        } else {
            self.out.push_str("    ");
            self.out.push_str(s);
            self.out.push('\n');
        }
    }

    /// A phase heading.
    fn phase(&mut self, title: &str, why: &str) {
        self.out.push('\n');
        for (i, l) in title.lines().enumerate() {
            let lead = if i == 0 { "----" } else { "    " };
            self.line(&format!("// {lead} {l}"));
        }
        for l in why.lines() {
            self.line(&format!("// {l}"));
        }
    }

    fn match_ops(&mut self, result: &str, ops: &str, attribute: Option<&str>) {
        let attrs = attribute.map_or(String::new(), |a| format!(" attributes{{{a}}}"));
        self.line(&format!(
            "{result} = transform.structured.match ops{{[\"{ops}\"]}}{attrs} in %payload"
        ));
        self.line("    : (!transform.any_op) -> !transform.any_op");
    }

    /// `%r = <op> %x : (!transform.any_op) -> !transform.any_op`.
    fn unary(&mut self, result: &str, op: &str, target: &str) {
        self.line(&format!("{result} = {op} {target}"));
        self.line("    : (!transform.any_op) -> !transform.any_op");
    }

    fn annotate(&mut self, target: &str, name: &str) {
        self.line(&format!(
            "transform.annotate {target} \"{name}\" : !transform.any_op"
        ));
    }

    fn tile_for(&mut self, results: &str, target: &str, sizes: &[u64]) {
        let n_loops = sizes.iter().filter(|&&s| s != 0).count();
        let types = vec!["!transform.any_op"; n_loops + 1].join(", ");
        self.line(&format!(
            "{results} = transform.structured.tile_using_for {target} tile_sizes {}",
            list(sizes)
        ));
        self.line(&format!("    : (!transform.any_op) -> ({types})"));
    }

    fn tile_forall(&mut self, results: &str, target: &str, sizes: &[u64]) {
        self.line(&format!(
            "{results} = transform.structured.tile_using_forall {target} tile_sizes {}",
            list(sizes)
        ));
        self.line("    : (!transform.any_op) -> (!transform.any_op, !transform.any_op)");
    }

    fn fuse_into(&mut self, results: &str, producer: &str, container: &str) {
        self.line(&format!(
            "{results} = transform.structured.fuse_into_containing_op {producer} into {container}"
        ));
        self.line(
            "    : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)",
        );
    }

    fn include(&mut self, name: &str) {
        self.line(&format!(
            "transform.include @{name} failures(propagate) (%payload)"
        ));
        self.line("    : (!transform.any_op) -> ()");
    }

    /// Canonicalization with memref alias folding, then mlir-air's unit-dimension folding.
    fn canonicalize_and_fold_units(&mut self, tag: &str) {
        self.match_ops(&format!("%kernel_{tag}"), "func.func", None);
        self.line(&format!("transform.apply_patterns to %kernel_{tag} {{"));
        for p in [
            "linalg.tiling_canonicalization",
            "scf.for_loop_canonicalization",
            "canonicalization",
            "memref.fold_memref_alias_ops",
        ] {
            self.line(&format!("  transform.apply_patterns.{p}"));
        }
        self.line("} : !transform.any_op");
        self.match_ops(&format!("%kernel_{tag}_units"), "func.func", None);
        self.unary(
            &format!("%kernel_{tag}_folded"),
            "transform.air.fold_unit_extent_dims",
            &format!("%kernel_{tag}_units"),
        );
    }
}

fn list(v: &[u64]) -> String {
    format!(
        "[{}]",
        v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    )
}

/// The schedule for `p`, built on the transform library (expand it before use).
pub fn script(p: &MatmulParams) -> String {
    let [pack_m, pack_n, pack_k] = p.pack;
    let (core_m, core_n) = (p.l1_m / pack_m, p.l1_n / pack_n);
    let k_step = p.l2_k / pack_k;
    let info = &p.info;
    let mut w = Writer { out: String::new() };
    w.out.push_str(&format!(
        "// triton-npu automatic matmul schedule (generated; kept as auto_transform.mlir).\n\
         // C[{m}x{n}] {out} = A[{m}x{k}] {inp} x B[{k}x{n}] {inp} on {target}.\n\
         // pack (M, N, K) = ({pack_m}, {pack_n}, {pack_k}); herd {hm}x{hn}; per-core block \
         l1_m x l1_n = {l1m}x{l1n};\n\
         // l2_k = {l2k}; accumulator {acc}; contraction inputs cast to {cin}.\n",
        m = info.m,
        n = info.n,
        k = info.k,
        out = info.output,
        inp = info.input,
        target = p.target,
        hm = p.herd[0],
        hn = p.herd[1],
        l1m = p.l1_m,
        l1n = p.l1_n,
        l2k = p.l2_k,
        acc = p.accumulator,
        cin = p.contract_input.unwrap_or("nothing"),
    ));
    w.out.push_str(
        "module attributes {transform.with_named_sequence} {\n  \
         transform.named_sequence @__transform_main(\n      \
         %payload: !transform.any_op {transform.readonly}) {\n",
    );

    w.phase(
        "1. Stream A and B from L3 to L2 in K blocks of l2_k",
        "The two loads become linalg.copy ops (A first, B second), each tiled along K into a\n\
         loop; phase 8 fuses both loops into the K reduction loop.",
    );
    w.match_ops("%kernel_for_copies", "func.func", None);
    w.unary(
        "%kernel_copies_linalg",
        "transform.air.convert_memref_copy_to_linalg_copy",
        "%kernel_for_copies",
    );
    w.match_ops("%loads", "linalg.copy", None);
    w.line("%load_a, %load_b = transform.split_handle %loads");
    w.line("    : (!transform.any_op) -> (!transform.any_op, !transform.any_op)");
    w.tile_for("%load_a_block, %load_a_loop", "%load_a", &[0, p.l2_k]);
    w.annotate("%load_a_loop", "copy_a_loop");
    w.tile_for("%load_b_block, %load_b_loop", "%load_b", &[p.l2_k]);
    w.annotate("%load_b_loop", "copy_b_loop");

    w.phase(
        "2. The result C lives in L2",
        "Allocating the fill's destination (memory_space = 1) before bufferization keeps C\n\
         out of L3.",
    );
    w.match_ops("%init", "linalg.fill", None);
    w.line("%c_l2, %c_l2_ops = transform.structured.bufferize_to_allocation %init");
    w.line("    {memory_space = 1, bufferize_destination_only, emit_dealloc} : !transform.any_op");

    w.phase(
        &format!("3. Pack to the MAC shape [{pack_m}, {pack_n}, {pack_k}]"),
        "Pack M, N, K; transpose the outer dims of A, B (and B's inner tile) and C so that each\n\
         core walks contiguous tiles; C's packed tile goes to L1 (memory_space = 2).",
    );
    w.match_ops("%mm", "linalg.matmul", None);
    w.line(&format!(
        "%mm_packed = transform.structured.pack %mm packed_sizes = {}",
        list(&p.pack)
    ));
    w.line("    : (!transform.any_op) -> (!transform.any_op)");
    for (operand, source, compute, result, perms) in [
        (
            "a",
            "%mm_packed[0]",
            "%mm_packed",
            "%mm_a",
            "outer_perm = [1, 0]",
        ),
        (
            "b",
            "%mm_a[1]",
            "%mm_a",
            "%mm_ab",
            "outer_perm = [1, 0] inner_perm = [1, 0]",
        ),
    ] {
        w.line(&format!(
            "%pack_{operand}_op = transform.get_producer_of_operand {source}"
        ));
        w.line("    : (!transform.any_op) -> (!transform.any_op)");
        w.line(&format!(
            "{result}, %pack_{operand}, %unpack_{operand}_unused = \
             transform.structured.pack_transpose %pack_{operand}_op with_compute_op({compute})"
        ));
        w.line(&format!(
            "    {perms} : (!transform.any_op, !transform.any_op)"
        ));
        w.line("    -> (!transform.any_op, !transform.any_op, !transform.any_op)");
    }
    w.line("%unpack_c_op = transform.get_consumers_of_result %mm_ab[0]");
    w.line("    : (!transform.any_op) -> (!transform.any_op)");
    w.line(
        "%mm_abc, %pack_c, %unpack_c = transform.structured.pack_transpose %unpack_c_op \
         with_compute_op(%mm_ab)",
    );
    w.line("    outer_perm = [1, 0] : (!transform.any_op, !transform.any_op)");
    w.line("    -> (!transform.any_op, !transform.any_op, !transform.any_op)");
    w.line("%c_l1, %c_l1_ops = transform.structured.bufferize_to_allocation %pack_c");
    w.line(
        "    {memory_space = 2, bufferize_destination_only, memcpy_op = \"linalg.copy\", \
         emit_dealloc} : !transform.any_op",
    );
    w.annotate("%mm_abc", "packed_matmul");

    w.phase(
        &format!(
            "4. K reduction loop in steps of {k_step} packed tiles (l2_k = {})",
            p.l2_k
        ),
        "The packs of A and B move into the loop, so each iteration packs one K block.",
    );
    w.tile_for("%mm_k_block, %k_loop", "%mm_abc", &[0, 0, k_step]);
    w.annotate("%k_loop", "k_reduction_loop");
    w.fuse_into("%pack_a_in_k, %k_loop_a", "%pack_a", "%k_loop");
    w.fuse_into("%pack_b_in_k, %k_loop_b", "%pack_b", "%k_loop");

    w.phase(
        &format!(
            "5. One core per {core_m}x{core_n} packed block: a {}x{} herd",
            p.herd[0], p.herd[1]
        ),
        "The packed matmul is tiled with an scf.forall over the cores, and the K-block packs\n\
         follow it into the forall.",
    );
    w.match_ops("%mm_for_cores", "linalg.generic", Some("packed_matmul"));
    w.tile_forall(
        "%mm_core, %compute_loop",
        "%mm_for_cores",
        &[core_m, core_n, 0],
    );
    w.annotate("%compute_loop", "compute_forall");
    w.annotate("%mm_core", "matmul_compute");
    w.fuse_into(
        "%pack_a_in_core, %compute_loop_a",
        "%pack_a_in_k",
        "%compute_loop",
    );
    w.fuse_into(
        "%pack_b_in_core, %compute_loop_b",
        "%pack_b_in_k",
        "%compute_loop",
    );
    w.include("canonicalize_with_cse");

    w.phase(
        "6. A and B tiles in L1; the init and the write-back as herds of their own",
        "The fill that zeroes C becomes a generic tiled like the compute loop (prologue);\n\
         the unpack of C back to L2 is tiled per core block (epilogue).",
    );
    for (operand, handle) in [("a", "%pack_a_in_core"), ("b", "%pack_b_in_core")] {
        w.line(&format!(
            "%{operand}_l1, %{operand}_l1_ops = transform.structured.bufferize_to_allocation \
             {handle}"
        ));
        w.line(
            "    {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op",
        );
    }
    w.match_ops("%zero_fill", "linalg.fill", None);
    w.unary(
        "%zero_generic",
        "transform.structured.generalize",
        "%zero_fill",
    );
    w.annotate("%zero_generic", "init_fill");
    w.line("%zero_swapped = transform.structured.interchange %zero_generic");
    w.line("    iterator_interchange = [1, 0, 2, 3] : (!transform.any_op) -> !transform.any_op");
    w.tile_forall(
        "%zero_core, %prologue_loop",
        "%zero_swapped",
        &[core_m, core_n],
    );
    w.annotate("%prologue_loop", "prologue_forall");
    w.match_ops("%write_back", "linalg.unpack", None);
    w.tile_forall(
        "%write_back_core, %epilogue_loop",
        "%write_back",
        &[p.l1_m, p.l1_n],
    );
    w.annotate("%epilogue_loop", "epilogue_forall");
    w.include("canonicalize_with_cse");

    w.phase(
        "7. Bufferize (every buffer above already has its L2/L1 space), then tidy the copies",
        "",
    );
    w.include("one_shot_bufferize");
    w.match_ops("%kernel_bufferized", "func.func", None);
    w.line("transform.apply_patterns to %kernel_bufferized {");
    for pat in [
        "linalg.tiling_canonicalization",
        "scf.for_loop_canonicalization",
        "canonicalization",
    ] {
        w.line(&format!("  transform.apply_patterns.{pat}"));
    }
    w.line("} : !transform.any_op");
    w.line("transform.apply_cse to %kernel_bufferized : !transform.any_op");
    w.line("transform.apply_patterns to %kernel_bufferized {");
    w.line("  transform.apply_patterns.canonicalization");
    w.line("} : !transform.any_op");
    w.unary(
        "%kernel_live_copies",
        "transform.air.remove_uninitialized_copy",
        "%kernel_bufferized",
    );
    w.unary(
        "%kernel_direct_copies",
        "transform.air.eliminate_cascade_memcpy",
        "%kernel_live_copies",
    );

    w.phase(
        "8. One loop over K: the L3->L2 copies join the reduction loop (L2 ping-pong)",
        "",
    );
    w.match_ops("%a_copy_loop", "scf.for", Some("copy_a_loop"));
    w.match_ops("%b_copy_loop", "scf.for", Some("copy_b_loop"));
    w.match_ops("%k_loop_now", "scf.for", Some("k_reduction_loop"));
    w.unary(
        "%k_loop_from_zero",
        "transform.air.normalize_for_bounds",
        "%k_loop_now",
    );
    w.line("transform.apply_cse to %kernel_direct_copies : !transform.any_op");
    w.line("%k_loop_with_b = transform.loop.fuse_sibling %b_copy_loop into %k_loop_from_zero");
    w.line("    : (!transform.any_op, !transform.any_op) -> !transform.any_op");
    w.line("%k_loop_with_ab = transform.loop.fuse_sibling %a_copy_loop into %k_loop_with_b");
    w.line("    : (!transform.any_op, !transform.any_op) -> !transform.any_op");

    w.phase(
        "9. Vector-sized pieces",
        "The core's matmul in 2x2 (then 1x1, unrolled twice each way) packed tiles; the init\n\
         one packed tile at a time.",
    );
    w.match_ops("%zero_tiles", "linalg.generic", Some("init_fill"));
    w.match_ops("%mm_tiles", "linalg.generic", Some("matmul_compute"));
    w.tile_for(
        "%mm_2x2, %mm_2x2_i, %mm_2x2_j, %mm_2x2_k",
        "%mm_tiles",
        &[2, 2, 1, 0, 0, 0],
    );
    w.tile_for(
        "%mm_1x1, %mm_1x1_i, %mm_1x1_j",
        "%mm_2x2",
        &[1, 1, 0, 0, 0, 0],
    );
    w.line("transform.loop.unroll %mm_1x1_j {factor = 2} : !transform.any_op");
    w.line("transform.loop.unroll %mm_1x1_i {factor = 2} : !transform.any_op");
    w.tile_for(
        "%zero_1x1, %zero_1x1_i, %zero_1x1_j",
        "%zero_tiles",
        &[1, 1, 0, 0],
    );

    w.phase(
        "10. The three foralls become herds (each on its own: forall_to_parallel takes one\n\
         bufferized loop), then their bodies are vectorized",
        "",
    );
    for (label, herd) in [
        ("prologue", "prologue_herd"),
        ("compute", "compute_herd"),
        ("epilogue", "epilogue_herd"),
    ] {
        w.match_ops(
            &format!("%{label}_forall"),
            "scf.forall",
            Some(&format!("{label}_forall")),
        );
        w.unary(
            &format!("%{label}_parallel"),
            "transform.loop.forall_to_parallel",
            &format!("%{label}_forall"),
        );
        w.unary(
            &format!("%{label}_herd"),
            "transform.air.par_to_herd",
            &format!("%{label}_parallel"),
        );
        w.annotate(&format!("%{label}_herd"), herd);
    }
    w.match_ops("%all_herds", "air.herd", None);
    w.unary(
        "%vector_herds",
        "transform.air.herd_vectorize",
        "%all_herds",
    );
    w.canonicalize_and_fold_units("vectorized");
    w.match_ops("%kernel_transfers", "func.func", None);
    w.unary(
        "%kernel_fewer_transfers",
        "transform.air.eliminate_redundant_vector_transfers",
        "%kernel_transfers",
    );

    w.phase(
        "11. Contraction types, and loop-invariant transfers out of the innermost loop",
        &format!(
            "The accumulator and result of vector.contract are {}{}.",
            p.accumulator,
            p.contract_input
                .map(|t| format!("; its inputs are cast to {t} (the MAC's input type)"))
                .unwrap_or_default()
        ),
    );
    w.match_ops("%compute_herd_now", "air.herd", Some("compute_herd"));
    w.line("%herd_loops = transform.structured.match ops{[\"scf.for\"]} in %compute_herd_now");
    w.line("    : (!transform.any_op) -> !transform.any_op");
    w.line(
        "%innermost_loop, %outer_loops = transform.split_handle %herd_loops \
         {overflow_result = 1}",
    );
    w.line("    : (!transform.any_op) -> (!transform.any_op, !transform.any_op)");
    w.match_ops("%contractions", "vector.contract", None);
    w.line(&format!(
        "%contractions_acc = transform.air.vector_type_cast %contractions \
         {{target_element_type = {}, input_indices = [2], output_indices = [0]}}",
        p.accumulator
    ));
    w.line("    : (!transform.any_op) -> !transform.any_op");
    if let Some(input) = p.contract_input {
        w.match_ops("%contractions_again", "vector.contract", None);
        w.line(&format!(
            "%contractions_in = transform.air.vector_type_cast %contractions_again \
             {{target_element_type = {input}, input_indices = [0, 1], output_indices = []}}"
        ));
        w.line("    : (!transform.any_op) -> !transform.any_op");
    }
    w.line(
        "%innermost_hoisted = transform.air.hoist_loop_invariant_transfers %compute_herd_now, \
         %innermost_loop",
    );
    w.line("    : (!transform.any_op, !transform.any_op) -> !transform.any_op");

    w.phase("12. Final loop clean-up", "");
    w.unary(
        "%innermost_flat",
        "transform.air.flatten_for_iter_args",
        "%innermost_hoisted",
    );
    w.unary(
        "%innermost_pointers",
        "transform.air.hoist_vector_transfer_pointers",
        "%innermost_flat",
    );
    w.canonicalize_and_fold_units("final");

    w.out.push('\n');
    w.line("transform.yield");
    w.out.push_str("  }\n}\n");
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{LinalgOp, summarize};

    fn info(m: u64, n: u64, k: u64, input: &str) -> MatmulInfo {
        MatmulInfo {
            m,
            n,
            k,
            input: input.into(),
            output: if input == "i8" { "i32" } else { "f32" }.into(),
        }
    }

    fn largest_divisor_by_search(x: u64, cap: u64) -> u64 {
        let mut best = 1;
        for d in 1..=x {
            if x.is_multiple_of(d) && d <= cap {
                best = d;
            }
        }
        best
    }

    /// §2's formulas, checked over many shapes for every type and target (no golden values).
    #[test]
    fn parameters_follow_the_rules() {
        for target in [NpuVersion::Npu1, NpuVersion::Npu2] {
            for input in ["f32", "bf16", "i8"] {
                let (pack, cap) = match (target, input) {
                    (NpuVersion::Npu2, _) => ([8, 8, 8], [4, 4]),
                    (NpuVersion::Npu1, "i8") => ([4, 8, 8], [4, 2]),
                    (NpuVersion::Npu1, _) => ([4, 4, 8], [4, 2]),
                };
                for m in (4..=256).step_by(4) {
                    for (n, k) in [(8, 8), (16, 24), (64, 64), (40, 16), (24, 48), (128, 8)] {
                        let i = info(m, n, k, input);
                        let got = params(&i, target);
                        let divisible = m % pack[0] == 0 && n % pack[1] == 0 && k % pack[2] == 0;
                        let Ok(p) = got else {
                            assert!(!divisible, "{target} {input} {m}x{n}x{k}: {got:?}");
                            continue;
                        };
                        assert!(divisible);
                        assert_eq!(p.pack, pack);
                        let hm = largest_divisor_by_search(m / pack[0], cap[0]);
                        let hn = largest_divisor_by_search(n / pack[1], cap[1]);
                        assert_eq!(p.herd, [hm, hn], "{target} {input} {m}x{n}");
                        assert!(p.herd[0] <= cap[0] && p.herd[1] <= cap[1]);
                        assert_eq!((p.l1_m, p.l1_n), (m / hm, n / hn));
                        assert_eq!(p.l1_m % pack[0], 0);
                        assert_eq!(p.l1_n % pack[1], 0);
                        // l2_k: the largest multiple of pack_k that divides K, at most 2·pack_k.
                        let want_l2k = (1..=k)
                            .filter(|v| v % pack[2] == 0 && k % v == 0 && *v <= 2 * pack[2])
                            .max()
                            .unwrap();
                        assert_eq!(p.l2_k, want_l2k, "{target} {input} K={k}");
                        let (acc, cast, emu) = match input {
                            "f32" => ("f32", Some("bf16"), true),
                            "bf16" => ("f32", None, false),
                            _ => ("i32", None, false),
                        };
                        assert_eq!(
                            (p.accumulator, p.contract_input, p.bf16_emulation),
                            (acc, cast, emu)
                        );
                    }
                }
            }
        }
        let e = params(&info(64, 64, 64, "f16"), NpuVersion::Npu2).unwrap_err();
        assert!(e.contains("f16"), "{e}");
        let e = params(&info(64, 6, 64, "bf16"), NpuVersion::Npu1).unwrap_err();
        assert!(e.contains("N = 6") && e.contains("pack size 4"), "{e}");
    }

    #[test]
    fn a_few_shapes_by_hand() {
        // 256x256x256 bf16 on npu2: 32 packed rows, herd 4x4, 64x64 per core, l2_k 16.
        let p = params(&info(256, 256, 256, "bf16"), NpuVersion::Npu2).unwrap();
        assert_eq!((p.herd, p.l1_m, p.l1_n, p.l2_k), ([4, 4], 64, 64, 16));
        // 64x64x64 i8 on npu1: pack 4,8,8; herd 4x2; 16x32 per core.
        let p = params(&info(64, 64, 64, "i8"), NpuVersion::Npu1).unwrap();
        assert_eq!(
            (p.pack, p.herd, p.l1_m, p.l1_n),
            ([4, 8, 8], [4, 2], 16, 32)
        );
        // 24 packed rows of 4 on npu1 → herd 3 is not ≤ 4 with 24/4=6: divisors of 6 ≤ 4 → 3.
        let p = params(&info(24, 8, 8, "f32"), NpuVersion::Npu1).unwrap();
        assert_eq!((p.herd, p.l2_k), ([3, 2], 8));
    }

    fn summary_with(ops: Vec<(&str, Vec<&str>, Vec<&str>)>) -> KernelSummary {
        KernelSummary {
            linalg_ops: ops
                .into_iter()
                .map(|(n, i, o)| LinalgOp {
                    name: n.into(),
                    inputs: i.into_iter().map(String::from).collect(),
                    outputs: o.into_iter().map(String::from).collect(),
                })
                .collect(),
            ..KernelSummary::default()
        }
    }

    #[test]
    fn detection_rule() {
        let mm = (
            "matmul",
            vec!["tensor<32x16xi8>", "tensor<16x64xi8>"],
            vec!["tensor<32x64xi32>"],
        );
        let fill = ("fill", vec!["i32"], vec!["tensor<32x64xi32>"]);
        let got = detect(&summary_with(vec![fill.clone(), mm.clone()])).unwrap();
        assert_eq!(
            (got.m, got.n, got.k, got.input.as_str(), got.output.as_str()),
            (32, 64, 16, "i8", "i32")
        );

        let e = detect(&summary_with(vec![
            fill.clone(),
            mm.clone(),
            ("generic", vec![], vec![]),
        ]))
        .unwrap_err();
        assert!(e.contains("linalg.generic"), "{e}");
        let e = detect(&summary_with(vec![
            ("transpose", vec![], vec![]),
            mm.clone(),
        ]))
        .unwrap_err();
        assert!(e.contains("linalg.transpose"), "{e}");
        let e = detect(&summary_with(vec![mm.clone(), mm.clone()])).unwrap_err();
        assert!(e.contains("2 linalg.matmul"), "{e}");
        let e = detect(&summary_with(vec![fill.clone()])).unwrap_err();
        assert!(e.contains("0 linalg.matmul"), "{e}");
        let bad = (
            "matmul",
            vec!["tensor<32x16xi8>", "tensor<8x64xi8>"],
            vec!["tensor<32x64xi32>"],
        );
        assert!(
            detect(&summary_with(vec![bad]))
                .unwrap_err()
                .contains("do not agree")
        );
        let mixed = (
            "matmul",
            vec!["tensor<32x16xi8>", "tensor<16x64xbf16>"],
            vec!["tensor<32x64xi32>"],
        );
        assert!(
            detect(&summary_with(vec![mixed]))
                .unwrap_err()
                .contains("different types")
        );
        let dynamic = (
            "matmul",
            vec!["tensor<?x16xi8>", "tensor<16x64xi8>"],
            vec!["tensor<32x64xi32>"],
        );
        assert!(
            detect(&summary_with(vec![dynamic]))
                .unwrap_err()
                .contains("static 2-D")
        );
    }

    #[test]
    fn f32_matmul_detection_from_text() {
        let f32_mm = "%0 = linalg.fill ins(%cst : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>\n\
            %1 = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x32xf32>) outs(%0 : tensor<32x32xf32>) -> tensor<32x32xf32>\n";
        assert!(is_f32_matmul(&summarize(f32_mm)));
        let bf16 = f32_mm.replace(
            "tensor<32x64xf32>, tensor<64x32xf32>",
            "tensor<32x64xbf16>, tensor<64x32xbf16>",
        );
        assert!(!is_f32_matmul(&summarize(&bf16)));
        let with_generic = format!(
            "{f32_mm}%2 = linalg.generic {{}} ins(%1 : tensor<32x32xf32>) outs(%1 : tensor<32x32xf32>)\n"
        );
        assert!(!is_f32_matmul(&summarize(&with_generic)));
        assert!(!is_f32_matmul(&summarize(&format!("{f32_mm}{f32_mm}"))));
    }
}
