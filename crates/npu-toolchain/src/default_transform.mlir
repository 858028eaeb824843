// triton-npu's default tiling schedule, used when AIR_TRANSFORM_TILING_SCRIPT is not set.
//
// Meant for elementwise kernels as triton-shared emits them (loads copied into buffers, one
// linalg.generic per expression, a store through bufferization.materialize_in_destination):
//   1. bufferize the kernel, so every generic works on memrefs;
//   2. split each generic into 4 parts, one per AIE core (4 columns exist on npu1 and npu2);
//   3. give each core's operands L1 buffers (the copies in and out become DMAs);
//   4. map the 4-way loop to an air.herd.
// Kernels with reductions, matmuls or broadcasts need a schedule of their own: set
// AIR_TRANSFORM_TILING_SCRIPT to a transform-dialect file written for them.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%module: !transform.any_op {transform.readonly}) {
    %func = transform.structured.match ops{["func.func"]} in %module
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %bufferized = transform.bufferization.one_shot_bufferize %func
        : (!transform.any_op) -> !transform.any_op

    %generics = transform.structured.match ops{["linalg.generic"]} in %module
        : (!transform.any_op) -> !transform.any_op
    %tiled, %forall = transform.structured.tile_using_forall %generics num_threads [4]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // mlir-air's transform extensions: L1 promotion, herd mapping, copies to DMAs. The
    // promotion comes first: converting the loop consumes its handle, and with it every handle
    // to the ops inside.
    %promoted = transform.air.linalg_promote %tiled {"memory_space"="L1"}
        : (!transform.any_op) -> !transform.any_op
    %parallel = transform.loop.forall_to_parallel %forall
        : (!transform.any_op) -> !transform.any_op
    %herd = transform.air.par_to_herd %parallel
        : (!transform.any_op) -> !transform.any_op
    %copies = transform.structured.match ops{["memref.copy", "linalg.copy"]} in %herd
        : (!transform.any_op) -> !transform.any_op
    %dmas = transform.air.copy_to_dma %copies
        : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
