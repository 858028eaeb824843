// triton-npu transform library: clean-up sequences.
//
// Each sequence takes the payload root (usually the module handed to
// @__transform_main), finds the kernel's func.func ops in it and cleans them
// up. They only rewrite IR in place and never invalidate the root handle, so
// they can sit between any two steps of a schedule.

// canonicalize_with_cse: canonicalization (including the tiling and scf.for
// loop clean-ups) followed by common-subexpression elimination.
// Use it after every step that tiles, fuses, pads or allocates, so that the
// next match sees folded affine.min/max bounds and no duplicated slices.
transform.named_sequence @canonicalize_with_cse(
    %root: !transform.any_op {transform.readonly}) {
  %kernels = transform.structured.match ops{["func.func"]} in %root
      : (!transform.any_op) -> !transform.any_op
  transform.apply_patterns to %kernels {
    transform.apply_patterns.linalg.tiling_canonicalization
    transform.apply_patterns.scf.for_loop_canonicalization
    transform.apply_patterns.canonicalization
  } : !transform.any_op
  transform.apply_cse to %kernels : !transform.any_op
  transform.yield
}

// canonicalize_with_fold_dims: the same clean-up, plus folding of unit
// extent dimensions through reshapes (a 1xN tensor becomes N).
// Use it first in an elementwise schedule, on the kernel as triton-shared
// emitted it: size-1 dimensions left by 2-D blocks would otherwise survive
// into the tiled loops and the vector types.
transform.named_sequence @canonicalize_with_fold_dims(
    %root: !transform.any_op {transform.readonly}) {
  %kernels = transform.structured.match ops{["func.func"]} in %root
      : (!transform.any_op) -> !transform.any_op
  transform.apply_patterns to %kernels {
    transform.apply_patterns.linalg.tiling_canonicalization
    transform.apply_patterns.scf.for_loop_canonicalization
    transform.apply_patterns.canonicalization
    transform.apply_patterns.linalg.fold_unit_extent_dims_via_reshapes
  } : !transform.any_op
  transform.apply_cse to %kernels : !transform.any_op
  transform.yield
}
