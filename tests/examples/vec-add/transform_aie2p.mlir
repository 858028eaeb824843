// vec-add: tiling schedule for triton-npu's example (out = x + y over bf16 vectors), for aie2p; air-opt reads it
// through AIR_TRANSFORM_TILING_SCRIPT. The library sequences it includes are expanded by the
// backend before air-opt sees the script. Elementwise: the one-generic-per-op Linalg is fused
// into one generic, flattened, its result allocated in L2 and split over the 8 columns (one
// scf.forall); the padded operands go to L1 before bufferizing; the loop becomes the herd.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {
    transform.include @canonicalize_with_fold_dims failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @fuse_elementwise_and_canonicalize failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @flatten_tile_forall_aie2p failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @pad_and_promote_binary_bf16 failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @canonicalize_with_cse failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @one_shot_bufferize failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @post_bufferize_cleanup failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @vectorize_generics_at_16 failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %vh = transform.include @air_herd_mapping_and_vectorize failures(propagate) (%arg1)
        : (!transform.any_op) -> !transform.any_op
    // AIE2P has bf16-only vector ops for some of these: compute them in bf16.
    transform.include @cast_bf16_only_ops failures(propagate) (%vh)
        : (!transform.any_op) -> ()
    transform.yield
  }
}
