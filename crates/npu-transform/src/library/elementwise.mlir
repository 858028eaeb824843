// triton-npu transform library: elementwise kernels.
//
// triton-shared emits one linalg.generic per Triton operation (plus
// linalg.fill for splat constants). An elementwise schedule fuses them into
// one loop nest, flattens it, gives its result an L2 buffer, splits it over
// the AIE columns with one scf.forall, and stages each core's slice of every
// operand in L1 -- all before one-shot bufferization, so that no
// intermediate is left in L3 (mlir-air refuses L3 allocations inside an
// air.segment).

// fuse_elementwise_and_canonicalize: fuse every producer/consumer pair of
// elementwise linalg ops of each kernel (mlir-air's
// transform.air.fuse_elementwise_linalg: producer fusion, fills and splat
// constants folded into their consumers, dead operands dropped), then
// canonicalize and CSE.
// Use it first (after canonicalize_with_fold_dims) on any kernel made of
// several elementwise Triton operations: it leaves one generic per stored
// result, which is what flatten_tile_forall expects.
transform.named_sequence @fuse_elementwise_and_canonicalize(
    %root: !transform.any_op {transform.readonly}) {
  %kernels = transform.structured.match ops{["func.func"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %fused_kernels = transform.air.fuse_elementwise_linalg %kernels
      : (!transform.any_op) -> !transform.any_op
  transform.apply_patterns to %fused_kernels {
    transform.apply_patterns.linalg.tiling_canonicalization
    transform.apply_patterns.scf.for_loop_canonicalization
    transform.apply_patterns.canonicalization
  } : !transform.any_op
  transform.apply_cse to %fused_kernels : !transform.any_op
  transform.yield
}

// flatten_tile_forall: for npu1 (AIE2, 4 columns). Collapses every
// linalg.generic to one dimension, allocates its result in L2
// (memory_space = 1) and splits it into 4 slices with one scf.forall
// (num_threads, so the herd is 4 cores wide whatever the block size).
// Use it after fusion, when exactly one generic is left: each generic gets
// its own forall, and the herd mapping accepts only one.
transform.named_sequence @flatten_tile_forall(
    %root: !transform.any_op {transform.readonly}) {
  %generics = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %flat = transform.structured.flatten_elementwise %generics
      : (!transform.any_op) -> !transform.any_op
  %result_in_l2, %l2_alloc = transform.structured.bufferize_to_allocation %flat
      {memory_space = 1, bufferize_destination_only, emit_dealloc}
      : !transform.any_op
  %flat_generics = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  // 4 slices: one per column of npu1's array.
  %slice, %columns = transform.structured.tile_using_forall %flat_generics
      num_threads [4]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
  transform.yield
}

// flatten_tile_forall_aie2p: flatten_tile_forall for npu2 (AIE2P, 8
// columns): the same steps, split into 8 slices.
// Use it instead of flatten_tile_forall in schedules for npu2. (With grid > 1
// it relies on mlir-air keeping each launch's base offset when it splits the
// L2 buffer, mlir-air PR #1696.)
transform.named_sequence @flatten_tile_forall_aie2p(
    %root: !transform.any_op {transform.readonly}) {
  %generics = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %flat = transform.structured.flatten_elementwise %generics
      : (!transform.any_op) -> !transform.any_op
  %result_in_l2, %l2_alloc = transform.structured.bufferize_to_allocation %flat
      {memory_space = 1, bufferize_destination_only, emit_dealloc}
      : !transform.any_op
  %flat_generics = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  // 8 slices: one per column of npu2's array.
  %slice, %columns = transform.structured.tile_using_forall %flat_generics
      num_threads [8]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
  transform.yield
}

// The pad_and_promote_* sequences below stage each core's slice in L1: every
// operand of the (tiled) generic is padded into a fresh tensor (nofold, so
// the copy is kept even when no padding is needed), the pads are rewritten
// as destination-passing ops, and the producer of each operand gets an L1
// buffer (memory_space = 2). They differ only in the number of operands and
// the element type of each padding value, which must be the operand's.
// Use the one whose operands match the fused generic, after
// flatten_tile_forall and before one_shot_bufferize.

// pad_and_promote_unary_bf16: one bf16 input, one bf16 result (relu, gelu,
// sigmoid, silu in bf16).
transform.named_sequence @pad_and_promote_unary_bf16(
    %root: !transform.any_op {transform.readonly}) {
  %generic = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %padded, %pads, %copy_back = transform.structured.pad %generic {
      padding_values = [0.0 : bf16, 0.0 : bf16],
      padding_dimensions = [0, 1],
      nofold_flags = [1, 1],
      copy_back_op = "linalg.copy"
  } : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  %pads_dps = transform.structured.rewrite_in_destination_passing_style %pads
      : (!transform.any_op) -> !transform.any_op
  %in0 = transform.get_producer_of_operand %padded[0]
      : (!transform.any_op) -> (!transform.any_op)
  %in0_l1, %in0_l1_ops = transform.structured.bufferize_to_allocation %in0
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %out = transform.get_producer_of_operand %padded[1]
      : (!transform.any_op) -> (!transform.any_op)
  %out_l1, %out_l1_ops = transform.structured.bufferize_to_allocation %out
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  transform.yield
}

// pad_and_promote_unary_f32in_bf16out: one f32 input, one bf16 result (a
// unary op reading an f32 buffer another kernel wrote, e.g. an f32-accumulated
// matmul, and storing bf16).
transform.named_sequence @pad_and_promote_unary_f32in_bf16out(
    %root: !transform.any_op {transform.readonly}) {
  %generic = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %padded, %pads, %copy_back = transform.structured.pad %generic {
      padding_values = [0.0 : f32, 0.0 : bf16],
      padding_dimensions = [0, 1],
      nofold_flags = [1, 1],
      copy_back_op = "linalg.copy"
  } : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  %pads_dps = transform.structured.rewrite_in_destination_passing_style %pads
      : (!transform.any_op) -> !transform.any_op
  %in0 = transform.get_producer_of_operand %padded[0]
      : (!transform.any_op) -> (!transform.any_op)
  %in0_l1, %in0_l1_ops = transform.structured.bufferize_to_allocation %in0
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %out = transform.get_producer_of_operand %padded[1]
      : (!transform.any_op) -> (!transform.any_op)
  %out_l1, %out_l1_ops = transform.structured.bufferize_to_allocation %out
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  transform.yield
}

// pad_and_promote_binary_bf16: two bf16 inputs, one bf16 result (vector
// add, axpy, swiglu in bf16).
transform.named_sequence @pad_and_promote_binary_bf16(
    %root: !transform.any_op {transform.readonly}) {
  %generic = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %padded, %pads, %copy_back = transform.structured.pad %generic {
      padding_values = [0.0 : bf16, 0.0 : bf16, 0.0 : bf16],
      padding_dimensions = [0, 1, 2],
      nofold_flags = [1, 1, 1],
      copy_back_op = "linalg.copy"
  } : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  %pads_dps = transform.structured.rewrite_in_destination_passing_style %pads
      : (!transform.any_op) -> !transform.any_op
  %in0 = transform.get_producer_of_operand %padded[0]
      : (!transform.any_op) -> (!transform.any_op)
  %in0_l1, %in0_l1_ops = transform.structured.bufferize_to_allocation %in0
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %in1 = transform.get_producer_of_operand %padded[1]
      : (!transform.any_op) -> (!transform.any_op)
  %in1_l1, %in1_l1_ops = transform.structured.bufferize_to_allocation %in1
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %out = transform.get_producer_of_operand %padded[2]
      : (!transform.any_op) -> (!transform.any_op)
  %out_l1, %out_l1_ops = transform.structured.bufferize_to_allocation %out
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  transform.yield
}

// pad_and_promote_binary_f32in_bf16out: two f32 inputs, one bf16 result
// (e.g. silu(gate) * up over two f32 matmul results, stored as bf16 for the
// next matmul).
transform.named_sequence @pad_and_promote_binary_f32in_bf16out(
    %root: !transform.any_op {transform.readonly}) {
  %generic = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %padded, %pads, %copy_back = transform.structured.pad %generic {
      padding_values = [0.0 : f32, 0.0 : f32, 0.0 : bf16],
      padding_dimensions = [0, 1, 2],
      nofold_flags = [1, 1, 1],
      copy_back_op = "linalg.copy"
  } : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  %pads_dps = transform.structured.rewrite_in_destination_passing_style %pads
      : (!transform.any_op) -> !transform.any_op
  %in0 = transform.get_producer_of_operand %padded[0]
      : (!transform.any_op) -> (!transform.any_op)
  %in0_l1, %in0_l1_ops = transform.structured.bufferize_to_allocation %in0
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %in1 = transform.get_producer_of_operand %padded[1]
      : (!transform.any_op) -> (!transform.any_op)
  %in1_l1, %in1_l1_ops = transform.structured.bufferize_to_allocation %in1
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %out = transform.get_producer_of_operand %padded[2]
      : (!transform.any_op) -> (!transform.any_op)
  %out_l1, %out_l1_ops = transform.structured.bufferize_to_allocation %out
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  transform.yield
}

// pad_and_promote_binary_f32: two f32 inputs, one f32 result (an f32
// residual add, an f32 vector add).
transform.named_sequence @pad_and_promote_binary_f32(
    %root: !transform.any_op {transform.readonly}) {
  %generic = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %padded, %pads, %copy_back = transform.structured.pad %generic {
      padding_values = [0.0 : f32, 0.0 : f32, 0.0 : f32],
      padding_dimensions = [0, 1, 2],
      nofold_flags = [1, 1, 1],
      copy_back_op = "linalg.copy"
  } : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  %pads_dps = transform.structured.rewrite_in_destination_passing_style %pads
      : (!transform.any_op) -> !transform.any_op
  %in0 = transform.get_producer_of_operand %padded[0]
      : (!transform.any_op) -> (!transform.any_op)
  %in0_l1, %in0_l1_ops = transform.structured.bufferize_to_allocation %in0
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %in1 = transform.get_producer_of_operand %padded[1]
      : (!transform.any_op) -> (!transform.any_op)
  %in1_l1, %in1_l1_ops = transform.structured.bufferize_to_allocation %in1
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  %out = transform.get_producer_of_operand %padded[2]
      : (!transform.any_op) -> (!transform.any_op)
  %out_l1, %out_l1_ops = transform.structured.bufferize_to_allocation %out
      {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
  transform.yield
}
