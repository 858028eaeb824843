// axpy: tiling schedule for this upstream-API example (elementwise over 1-D blocks), for aie2p; air-opt reads it
// through AIR_TRANSFORM_TILING_SCRIPT. The library sequences it includes are expanded by the
// backend before air-opt sees the script. Elementwise with operand types the library's pad
// sequences do not cover: fuse into one generic, flatten, allocate the result in L2 and split
// it over the 8 columns (one scf.forall), bufferize, then promote the tile's operands into L1
// inside the loop (air.linalg_promote), which becomes the herd.
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
    transform.include @one_shot_bufferize failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    transform.include @post_bufferize_cleanup failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %tile = transform.structured.match ops{["linalg.generic"]} in %arg1
        : (!transform.any_op) -> !transform.any_op
    %tile_l1 = transform.air.linalg_promote %tile {"memory_space"="L1"}
        : (!transform.any_op) -> !transform.any_op
    transform.include @vectorize_generics_at_16 failures(propagate) (%arg1)
        : (!transform.any_op) -> ()
    %vh = transform.include @air_herd_mapping_and_vectorize failures(propagate) (%arg1)
        : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
