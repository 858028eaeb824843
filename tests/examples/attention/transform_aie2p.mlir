// attention: tiling schedule for triton-npu's example (causal attention of one head per program: two matmuls around a row softmax), for aie2p and aie2
// (transform_aie2.mlir links here: nothing below depends on the array width; the default
// elementwise schedule would leave this kernel's reductions in L3); air-opt reads it
// through AIR_TRANSFORM_TILING_SCRIPT. The library sequences it includes are expanded by the
// backend before air-opt sees the script. Row-wise: after fusing the elementwise ops and moving
// each reduction's dimension innermost, the op that produces the stored value gets its result
// in L2 and is tiled eight rows per core (one scf.forall: the 32 query rows of a head make a
// herd of 4 cores, which fits both arrays; one row per core would ask for 32); its producers
// (both matmuls, the reductions, their inputs, K's transpose, the fills) are fused into that
// loop and their results allocated in L1, all before bufferizing; after bufferizing, what the
// loop reads from L2 is staged into L1; the loop becomes the herd.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {
    transform.include @canonicalize_with_fold_dims failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @fuse_elementwise_and_canonicalize failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %reduces = transform.structured.match ops{["linalg.reduce"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %innermost = transform.air.transpose_reduce %reduces
        : (!transform.any_op) -> !transform.any_op
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %store = transform.structured.match ops{["bufferization.materialize_in_destination"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %out = transform.get_producer_of_operand %store[0]
        : (!transform.any_op) -> !transform.any_op
    %red = transform.structured.match ops{["linalg.reduce"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    // The matmuls and the elementwise ops before the reductions.
    %pre = transform.get_producer_of_operand %red[0]
        : (!transform.any_op) -> !transform.any_op
    %fills = transform.structured.match ops{["linalg.fill"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %out_l2_buf, %out_l2 = transform.structured.bufferize_to_allocation %out
        {memory_space = 1, bufferize_destination_only, emit_dealloc} : !transform.any_op
    %row, %forall = transform.structured.tile_using_forall %out tile_sizes [8]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Producers are fused from the stored value backwards, each once the loop uses it (MLIR's
    // fuse_into_containing_op fuses an op into the loop for a use inside it): the output
    // matmul P·V, the cast of P (the softmax chain fused into it), the reductions and their
    // inputs, the scores matmul Q·Kᵀ, K's transpose, the fills.
    %mms = transform.structured.match ops{["linalg.matmul"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %qk, %pv = transform.split_handle %mms
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %p = transform.get_producer_of_operand %pv[0]
        : (!transform.any_op) -> !transform.any_op
    %kt = transform.get_producer_of_operand %qk[1]
        : (!transform.any_op) -> !transform.any_op
    %pv_in, %loop0 = transform.structured.fuse_into_containing_op %pv into %forall
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %p_in, %loop1 = transform.structured.fuse_into_containing_op %p into %loop0
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %red_in, %loop2 = transform.structured.fuse_into_containing_op %red into %loop1
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %pre_in, %loop3 = transform.structured.fuse_into_containing_op %pre into %loop2
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %qk_in, %loop4 = transform.structured.fuse_into_containing_op %qk into %loop3
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %kt_in, %loop5 = transform.structured.fuse_into_containing_op %kt into %loop4
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %fills_in, %loop6 = transform.structured.fuse_into_containing_op %fills into %loop5
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    // Everything computed inside the row loop lives in L1, decided before bufferizing.
    %f_ops = transform.structured.match ops{["linalg.fill"]} in %loop6
        : (!transform.any_op) -> !transform.any_op
    %f_buf, %f_l1 = transform.structured.bufferize_to_allocation %f_ops
        {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
    %r_ops = transform.structured.match ops{["linalg.reduce"]} in %loop6
        : (!transform.any_op) -> !transform.any_op
    %r_buf, %r_l1 = transform.structured.bufferize_to_allocation %r_ops
        {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
    // Transposes too (air.transpose_reduce gives a reduction over a leading dimension one,
    // into a tensor.empty that bufferizing would otherwise allocate in L3 inside the herd).
    %g_ops = transform.structured.match ops{["linalg.generic", "linalg.transpose"]} in %loop6
        : (!transform.any_op) -> !transform.any_op
    %g_buf, %g_l1 = transform.structured.bufferize_to_allocation %g_ops
        {memory_space = 2, bufferize_destination_only, emit_dealloc} : !transform.any_op
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @one_shot_bufferize failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @post_bufferize_cleanup failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    // What the row loop's ops read from outside L1 (the loaded rows and vectors, in L2) is
    // copied into L1 first (air.linalg_promote stages subview and broadcast operands alike;
    // the copies become DMAs): a core reads only its L1, and mlir-air's air.herd verifier
    // refuses a vectorized read of L2 inside a herd.
    %row_loop = transform.structured.match ops{["scf.forall"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %row_ops = transform.structured.match
        ops{["linalg.generic", "linalg.reduce", "linalg.fill", "linalg.transpose", "linalg.matmul"]}
        in %row_loop
        : (!transform.any_op) -> !transform.any_op
    %row_ops_l1 = transform.air.linalg_promote %row_ops {"memory_space"="L1"}
        : (!transform.any_op) -> !transform.any_op
    transform.include @vectorize_generics_at_16 failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %vh = transform.include @air_herd_mapping_and_vectorize failures(propagate) (%arg1)
        : (!transform.any_op) -> !transform.any_op
    transform.include @post_vectorize_reduce_cleanup failures(propagate) (%vh)
        : (!transform.any_op) -> ()
    transform.yield
  }
}
