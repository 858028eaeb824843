// triton-npu transform library: vector-width strips and vector clean-up.
//
// herd_vectorize (air_mapping.mlir) turns each linalg.generic inside a herd
// into vector ops of the generic's whole shape; tiling the generics first
// into fixed-width strips with an scf.for decides the vector length.

// vectorize_generics_at_16: tile every linalg.generic into strips of 16
// elements (one scf.for each).
// Use it after bufferization and before air_herd_mapping_and_vectorize; 16
// lanes is the width for most bf16/f32 operations on npu1 and npu2.
transform.named_sequence @vectorize_generics_at_16(
    %root: !transform.any_op {transform.readonly}) {
  %generics = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %strip, %strip_loop = transform.structured.tile_using_for %generics
      tile_sizes [16]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
  transform.yield
}

// vectorize_generics_at_32: the same with strips of 32 elements.
// Use it on npu2 for simple bf16 operations (additions) that have 32-lane
// instructions.
transform.named_sequence @vectorize_generics_at_32(
    %root: !transform.any_op {transform.readonly}) {
  %generics = transform.structured.match ops{["linalg.generic"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %strip, %strip_loop = transform.structured.tile_using_for %generics
      tile_sizes [32]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
  transform.yield
}

// post_vectorize_reduce_cleanup: after vectorizing a reduction, replace
// single-element vectors with scalars (mlir-air's
// convert_size1_vector_to_scalar: the AIE backend cannot lower vector<1xT>),
// drop leading unit vector dimensions and lower vector.multi_reduction with
// the inner-reduction strategy (reorder, flatten, unroll), then CSE.
// Use it after the herd mapping of softmax, layernorm, rms_norm and other
// kernels with a row reduction.
transform.named_sequence @post_vectorize_reduce_cleanup(
    %root: !transform.any_op {transform.readonly}) {
  %kernels = transform.structured.match ops{["func.func"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %scalarized = transform.air.convert_size1_vector_to_scalar %kernels
      : (!transform.any_op) -> !transform.any_op
  transform.apply_patterns to %scalarized {
    transform.apply_patterns.linalg.tiling_canonicalization
    transform.apply_patterns.scf.for_loop_canonicalization
    transform.apply_patterns.canonicalization
    transform.apply_patterns.vector.cast_away_vector_leading_one_dim
    transform.apply_patterns.vector.reorder_multi_reduction_dims lowering_strategy = "innerreduction"
    transform.apply_patterns.vector.multi_reduction_flattening lowering_strategy = "innerreduction"
    transform.apply_patterns.vector.multi_reduction_unrolling lowering_strategy = "innerreduction"
  } : !transform.any_op
  transform.apply_cse to %scalarized : !transform.any_op
  transform.yield
}
