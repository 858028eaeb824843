// axpy: tiling schedule for out = alpha * x + y over bf16 vectors (written for
// triton-npu's examples; air-opt reads it through AIR_TRANSFORM_TILING_SCRIPT when the example
// runs on aie2p): bufferize, cut every linalg.generic into 256-element tiles spread over the
// cores of one column group, stage each tile's operands in L1 and turn the tile loop into an
// air.herd.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %fn = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op
    %fn_buf = transform.bufferization.one_shot_bufferize %fn
        : (!transform.any_op) -> !transform.any_op

    %ops = transform.structured.match ops{["linalg.generic"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tile, %loop = transform.structured.tile_using_forall %ops tile_sizes [256]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // L1 staging before the loop conversion, which invalidates handles to ops inside it.
    %staged = transform.air.linalg_promote %tile {"memory_space"="L1"}
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
