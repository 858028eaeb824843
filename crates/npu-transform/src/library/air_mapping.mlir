// triton-npu transform library: mapping the core loop to an AIE herd.
//
// Both sequences take every scf.forall of the payload: upstream MLIR's
// forall_to_parallel accepts exactly one, bufferized (no shared outputs).
// So call them once, after one_shot_bufferize, when the schedule has left a
// single forall (fuse first: flatten_tile_forall gives each generic its own).

// air_herd_mapping_and_vectorize: scf.forall -> scf.parallel -> air.herd,
// the copies inside the herd become air DMAs, and the herd's body is
// vectorized (mlir-air's herd_vectorize). Returns the vectorized herd, for
// the type-casting sequences (cast_bf16_only_ops, cast_cmpf_and_select_ops).
// Use it as the last structural step of an elementwise schedule.
transform.named_sequence @air_herd_mapping_and_vectorize(
    %root: !transform.any_op {transform.readonly}) -> !transform.any_op {
  %core_loop = transform.structured.match ops{["scf.forall"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %parallel = transform.loop.forall_to_parallel %core_loop
      : (!transform.any_op) -> !transform.any_op
  %herd = transform.air.par_to_herd %parallel
      : (!transform.any_op) -> !transform.any_op
  %herd_copies = transform.structured.match ops{["memref.copy", "linalg.copy"]} in %herd
      : (!transform.any_op) -> !transform.any_op
  %herd_dmas = transform.air.copy_to_dma %herd_copies
      : (!transform.any_op) -> !transform.any_op
  %vector_herd = transform.air.herd_vectorize %herd
      : (!transform.any_op) -> !transform.any_op
  transform.yield %vector_herd : !transform.any_op
}

// air_herd_mapping_with_extern_and_vectorize: air_herd_mapping_and_vectorize
// that also marks the herd `link_with = "extern_func.o"`, so the cores link
// an object with external functions.
// Use it on npu1 for kernels whose math (exp, ...) needs library functions
// that AIE2 has no instructions for; extern_func.o must be provided to aircc.
transform.named_sequence @air_herd_mapping_with_extern_and_vectorize(
    %root: !transform.any_op {transform.readonly}) -> !transform.any_op {
  %core_loop = transform.structured.match ops{["scf.forall"]} in %root
      : (!transform.any_op) -> !transform.any_op
  %parallel = transform.loop.forall_to_parallel %core_loop
      : (!transform.any_op) -> !transform.any_op
  %herd = transform.air.par_to_herd %parallel
      : (!transform.any_op) -> !transform.any_op
  %extern_object = transform.param.constant "extern_func.o" -> !transform.any_param
  transform.annotate %herd "link_with" = %extern_object
      : !transform.any_op, !transform.any_param
  %herd_copies = transform.structured.match ops{["memref.copy", "linalg.copy"]} in %herd
      : (!transform.any_op) -> !transform.any_op
  %herd_dmas = transform.air.copy_to_dma %herd_copies
      : (!transform.any_op) -> !transform.any_op
  %vector_herd = transform.air.herd_vectorize %herd
      : (!transform.any_op) -> !transform.any_op
  transform.yield %vector_herd : !transform.any_op
}
