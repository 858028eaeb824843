// matmul-f32: tiling schedule for triton-npu's example (f32 inputs with bf16 emulation, 32x32 blocks over K = 32), for aie2p; air-opt reads it
// through AIR_TRANSFORM_TILING_SCRIPT. The library sequences it includes are expanded by the
// backend before air-opt sees the script. One tl.dot is linalg.fill + linalg.matmul: the
// result (the fill) is allocated in L2 first; the matmul is split into a herd of
// 16x16 output tiles (one scf.forall) with the fill fused in, and its K loop into steps
// of 16; after bufferizing, the operands of each step are promoted into L1 inside the loop,
// which becomes the herd.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %fill = transform.structured.match ops{["linalg.fill"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %c_l2_buf, %c_l2 = transform.structured.bufferize_to_allocation %fill
        {memory_space = 1, bufferize_destination_only, emit_dealloc} : !transform.any_op
    %mm = transform.structured.match ops{["linalg.matmul"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %tile, %forall = transform.structured.tile_using_forall %mm tile_sizes [16, 16]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %fill_in, %loop = transform.structured.fuse_into_containing_op %fill into %forall
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %step, %k_loop = transform.structured.tile_using_for %tile tile_sizes [0, 0, 16]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %acc_buf, %acc_l1 = transform.structured.bufferize_to_allocation %fill_in
        {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @one_shot_bufferize failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @post_bufferize_cleanup failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %steps = transform.structured.match ops{["linalg.matmul"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %steps_l1 = transform.air.linalg_promote %steps {"operands_to_promote"=[0, 1], "memory_space"="L1"}
        : (!transform.any_op) -> !transform.any_op
    %vh = transform.include @air_herd_mapping_and_vectorize failures(propagate) (%arg1)
        : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
