// Tiling schedule for the row-softmax kernel (written for triton-npu's examples; passed to
// air-opt through AIR_TRANSFORM_TILING_SCRIPT when this example runs on aie2p). One program
// handles one row, so nothing is split: the row's elementwise generics run on one core with
// their operands staged in L1, and the max/sum reductions stay next to them.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %fn = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
      transform.apply_patterns.linalg.fold_unit_extent_dims_via_reshapes
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op
    %fn_buf = transform.bufferization.one_shot_bufferize %fn
        : (!transform.any_op) -> !transform.any_op

    // A single-iteration loop around each generic becomes the 1x1 herd of its core.
    %rows = transform.structured.match ops{["linalg.generic"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %row, %loop = transform.structured.tile_using_forall %rows num_threads [1]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %staged = transform.air.linalg_promote %row {"memory_space"="L1"}
        : (!transform.any_op) -> !transform.any_op
    %par = transform.loop.forall_to_parallel %loop
        : (!transform.any_op) -> !transform.any_op
    %herd = transform.air.par_to_herd %par
        : (!transform.any_op) -> !transform.any_op
    %moves = transform.structured.match ops{["memref.copy", "linalg.copy"]} in %herd
        : (!transform.any_op) -> !transform.any_op
    %dma = transform.air.copy_to_dma %moves
        : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
