// triton-npu transform library: vector element types the AIE2P vector unit
// accepts.
//
// Triton computes bf16 kernels in f32 (arith.extf before, arith.truncf
// after). On AIE2P, exp, add, sub, mul, max and multi-reduction exist only
// for bf16 vectors (divf and rsqrt only for f32), and comparisons/selects
// want bf16 data operands. The sequences below cast those vector ops back to
// bf16 with mlir-air's vector_type_cast, through transform.foreach_match over
// a vectorized herd. The matchers and actions are named sequences that
// foreach_match refers to by symbol: triton-npu copies them into any script
// that uses foreach_match (they cannot be expanded inline).

// match_bf16_only_op: matcher; succeeds on a vector op that AIE2P runs only
// in bf16 (math.exp, arith.addf/subf/mulf/maxnumf, vector.multi_reduction).
transform.named_sequence @match_bf16_only_op(
    %candidate: !transform.any_op {transform.readonly}) -> !transform.any_op {
  transform.match.operation_name %candidate
      ["math.exp", "arith.addf", "arith.subf", "arith.mulf",
       "arith.maxnumf", "vector.multi_reduction"] : !transform.any_op
  transform.yield %candidate : !transform.any_op
}

// action_cast_to_bf16: action; casts every vector operand and result of the
// matched op to bf16.
transform.named_sequence @action_cast_to_bf16(
    %matched: !transform.any_op {transform.consumed}) {
  %in_bf16 = transform.air.vector_type_cast %matched {target_element_type = bf16}
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}

// match_cmpf: matcher; succeeds on arith.cmpf.
transform.named_sequence @match_cmpf(
    %candidate: !transform.any_op {transform.readonly}) -> !transform.any_op {
  transform.match.operation_name %candidate ["arith.cmpf"] : !transform.any_op
  transform.yield %candidate : !transform.any_op
}

// action_cast_cmpf_to_bf16: action; casts the two compared operands (inputs
// 0 and 1) to bf16 and leaves the i1 result alone.
transform.named_sequence @action_cast_cmpf_to_bf16(
    %matched: !transform.any_op {transform.consumed}) {
  %in_bf16 = transform.air.vector_type_cast %matched
      {target_element_type = bf16, input_indices = [0, 1]}
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}

// match_select: matcher; succeeds on arith.select.
transform.named_sequence @match_select(
    %candidate: !transform.any_op {transform.readonly}) -> !transform.any_op {
  transform.match.operation_name %candidate ["arith.select"] : !transform.any_op
  transform.yield %candidate : !transform.any_op
}

// action_cast_select_to_bf16: action; casts the two selected values (inputs
// 1 and 2) and the result to bf16 and leaves the i1 condition alone.
transform.named_sequence @action_cast_select_to_bf16(
    %matched: !transform.any_op {transform.consumed}) {
  %in_bf16 = transform.air.vector_type_cast %matched
      {target_element_type = bf16, input_indices = [1, 2], output_indices = [0]}
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}

// cast_bf16_only_ops: in the given vectorized herd (consumed), casts every
// bf16-only vector op (match_bf16_only_op) to bf16; f32-only ops (divf,
// rsqrt) stay f32.
// Use it on the herd air_herd_mapping_and_vectorize returns, for bf16
// kernels on npu2 that compute in f32 (sigmoid, silu, gelu, relu, axpy,
// swiglu).
transform.named_sequence @cast_bf16_only_ops(
    %herd: !transform.any_op {transform.consumed}) {
  transform.foreach_match in %herd
      @match_bf16_only_op -> @action_cast_to_bf16
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}

// cast_cmpf_and_select_ops: in the given vectorized herd (consumed), casts
// the data operands of arith.cmpf and arith.select to bf16, leaving the i1
// conditions alone.
// Use it for bf16 kernels with comparisons or tl.where (leaky_relu).
transform.named_sequence @cast_cmpf_and_select_ops(
    %herd: !transform.any_op {transform.consumed}) {
  transform.foreach_match in %herd
      @match_cmpf -> @action_cast_cmpf_to_bf16,
      @match_select -> @action_cast_select_to_bf16
      : (!transform.any_op) -> !transform.any_op
  transform.yield
}
