// triton-npu transform library: tensors to buffers.

// one_shot_bufferize: one-shot bufferization of every kernel function:
// tensors become memrefs, and every scf.forall loses its shared outputs
// (which forall_to_parallel requires).
// Use it once, after every intermediate has been given its L2/L1 buffer with
// bufferize_to_allocation (flatten_tile_forall, pad_and_promote_*): a buffer
// it has to create itself lands in L3 (memory space 0), and mlir-air refuses
// L3 allocations inside an air.segment.
transform.named_sequence @one_shot_bufferize(
    %root: !transform.any_op {transform.readonly}) {
  %kernels = transform.structured.match ops{["func.func"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %bufferized = transform.bufferization.one_shot_bufferize %kernels
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}

// post_bufferize_cleanup: after bufferization, canonicalize and CSE, then
// turn linalg.copy ops into memref.copy, drop copies out of buffers nothing
// wrote (mlir-air's remove_uninitialized_copy) and collapse chains of copies
// through intermediate buffers (eliminate_cascade_memcpy).
// Use it right after one_shot_bufferize, before the herd mapping turns the
// remaining copies into DMAs.
transform.named_sequence @post_bufferize_cleanup(
    %root: !transform.any_op {transform.readonly}) {
  %kernels = transform.structured.match ops{["func.func"]} in %root
      : (!transform.any_op) -> !transform.any_op
  transform.apply_patterns to %kernels {
    transform.apply_patterns.linalg.tiling_canonicalization
    transform.apply_patterns.scf.for_loop_canonicalization
    transform.apply_patterns.canonicalization
  } : !transform.any_op
  transform.apply_cse to %kernels : !transform.any_op
  // A second round folds what CSE exposed.
  transform.apply_patterns to %kernels {
    transform.apply_patterns.canonicalization
  } : !transform.any_op
  %linalg_copies = transform.structured.match ops{["linalg.copy"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %as_memref_copies = transform.structured.linalg_copy_to_memref %linalg_copies
      : (!transform.any_op) -> !transform.any_op
  %without_dead_copies = transform.air.remove_uninitialized_copy %kernels
      : (!transform.any_op) -> !transform.any_op
  %without_cascades = transform.air.eliminate_cascade_memcpy %without_dead_copies
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}
