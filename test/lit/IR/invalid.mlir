// RUN: sdopt %s -split-input-file -verify-diagnostics

// One case per constraint of the sd ops. Ops whose result type is inferred
// report the broken constraint, then MLIR's "failed to infer returned types".
// Attribute constraints are in attrs-invalid.mlir.

//===----------------------------------------------------------------------===//
// sd.mesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{mesh axis "data" appears twice}}
sd.mesh @mesh = <["data"=2, "data"=2]>

// -----

func.func @mesh_in_function() {
  // expected-error @+1 {{'sd.mesh' op expects parent op 'builtin.module'}}
  sd.mesh @mesh = <["data"=2]>
  return
}

//===----------------------------------------------------------------------===//
// Tensor sizes (every op, and annotated function arguments and results)
//===----------------------------------------------------------------------===//

// -----

// 16 × 3037000500² elements: more than int64 counts.
func.func @size_operand_elements(%x: tensor<16x3037000500x3037000500xf32>) {
  // expected-error @+1 {{'sd.tanh' op operand #0 of type 'tensor<16x3037000500x3037000500xf32>' has more than 9223372036854775807 elements}}
  %y = sd.tanh %x : tensor<16x3037000500x3037000500xf32>
  return
}

// -----

// 2^62 f32 elements count, but their 2^64 bytes do not.
func.func @size_result_bytes(%x: tensor<f32>) {
  // expected-error @+1 {{'sd.broadcast_in_dim' op result #0 of type 'tensor<4611686018427387904xf32>' has 4611686018427387904 elements, more than 9223372036854775807 bytes}}
  %y = sd.broadcast_in_dim %x dims = [] : (tensor<f32>) -> tensor<4611686018427387904xf32>
  return
}

// -----

// A dynamic dimension is not counted; the static ones are.
func.func @size_dynamic_batch(%x: tensor<?x4611686018427387904x2xbf16>) {
  // expected-error @+1 {{'sd.neg' op operand #0 of type 'tensor<?x4611686018427387904x2xbf16>' has more than 9223372036854775807 elements}}
  %y = sd.neg %x : tensor<?x4611686018427387904x2xbf16>
  return
}

// -----

// An unused parameter is checked by its annotation.
// expected-error @+1 {{argument #0 ("w") of type 'tensor<3037000499x3037000499xf32>' has 9223372030926249001 elements, more than 9223372036854775807 bytes}}
func.func @size_argument(%w: tensor<3037000499x3037000499xf32> {sd.role = #sd.param<"w", zeros>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{result #0 of type 'tensor<2305843009213693952x2xbf16>' has 4611686018427387904 elements, more than 9223372036854775807 bytes}}
func.func @size_result(%x: tensor<2305843009213693952x2xbf16>) -> (tensor<2305843009213693952x2xbf16> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) {
  return %x : tensor<2305843009213693952x2xbf16>
}

// -----

// The op's sharding is checked before its verifier runs: the size first.
sd.mesh @mesh = <["data"=2]>
func.func @size_sharded_op(%x: tensor<f32>) {
  // expected-error @+1 {{'sd.broadcast_in_dim' op result #0 of type 'tensor<3037000500x3037000500xf32>' has more than 9223372036854775807 elements}}
  %y = sd.broadcast_in_dim %x dims = [] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : (tensor<f32>) -> tensor<3037000500x3037000500xf32>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// -----

func.func @select_pred_shape(%p: tensor<4x1xi1>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{predicate shape [4, 1] differs from the operands' shape [4, 8]}}
  %s = sd.select %p, %a, %a : tensor<4x1xi1>, tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

func.func @convert_to_i1(%x: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi1>'}}
  %y = "sd.convert"(%x) : (tensor<4xf32>) -> tensor<4xi1>
  return %y : tensor<4xi1>
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_dim_out_of_range(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'sd.reduce_sum' op dims [2] has a dimension out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.reduce_sum %x dims = [2] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @reduce_dim_twice(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'sd.reduce_max' op dims [1, 1] lists dimension 1 twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.reduce_max %x dims = [1, 1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @reduce_dims_unsorted(%x: tensor<4x8x2xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'sd.reduce_mean' op dims [2, 0] must be sorted ascending}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.reduce_mean %x dims = [2, 0] : (tensor<4x8x2xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

// -----

func.func @broadcast_dims_count(%x: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{dims [1] must have one entry per operand dimension (2)}}
  %y = sd.broadcast_in_dim %x dims = [1] : (tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @broadcast_dim_out_of_range(%x: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{dims [2] has a dimension out of range for rank 2}}
  %y = sd.broadcast_in_dim %x dims = [2] : (tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @broadcast_dims_not_increasing(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{dims [1, 0] must be strictly increasing}}
  %y = sd.broadcast_in_dim %x dims = [1, 0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @broadcast_size(%x: tensor<3xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{operand dimension 0 of size 3 cannot broadcast to size 8}}
  %y = sd.broadcast_in_dim %x dims = [1] : (tensor<3xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @broadcast_element_type(%x: tensor<8xf32>) -> tensor<2x8xbf16> {
  // expected-error @+1 {{element type 'bf16' differs from the operand's 'f32'}}
  %y = sd.broadcast_in_dim %x dims = [1] : (tensor<8xf32>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

func.func @reshape_element_type(%x: tensor<4x8xf32>) -> tensor<32xbf16> {
  // expected-error @+1 {{element type 'bf16' differs from the operand's 'f32'}}
  %y = sd.reshape %x : (tensor<4x8xf32>) -> tensor<32xbf16>
  return %y : tensor<32xbf16>
}

// -----

func.func @reshape_two_dynamic(%x: tensor<?x8xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{result type 'tensor<?x?xf32>' has more than one dynamic dimension}}
  %y = sd.reshape %x : (tensor<?x8xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @reshape_count(%x: tensor<4x8xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{cannot reshape 'tensor<4x8xf32>' (32 elements) into 'tensor<4x6xf32>' (24 elements)}}
  %y = sd.reshape %x : (tensor<4x8xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @transpose_repeated(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'sd.transpose' op permutation [0, 0] is not a permutation of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.transpose %x permutation = [0, 0] : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @transpose_length(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'sd.transpose' op permutation [0] is not a permutation of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.transpose %x permutation = [0] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @slice_entries(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'sd.slice' op start, limit and strides need 2 entries each (one per dimension)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.slice %x start = [0, 0] limit = [4, 8] strides = [1] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @slice_out_of_bounds(%x: tensor<4x8xf32>) -> tensor<4x9xf32> {
  // expected-error @+2 {{'sd.slice' op slice [0, 9) of dimension 1 is out of bounds for size 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.slice %x start = [0, 0] limit = [4, 9] strides = [1, 1] : (tensor<4x8xf32>) -> tensor<4x9xf32>
  return %y : tensor<4x9xf32>
}

// -----

func.func @slice_start_after_limit(%x: tensor<4x8xf32>) -> tensor<4x0xf32> {
  // expected-error @+2 {{'sd.slice' op slice [5, 4) of dimension 1 is out of bounds for size 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.slice %x start = [0, 5] limit = [4, 4] strides = [1, 1] : (tensor<4x8xf32>) -> tensor<4x0xf32>
  return %y : tensor<4x0xf32>
}

// -----

func.func @slice_stride(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'sd.slice' op stride 0 of dimension 0 must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.slice %x start = [0, 0] limit = [4, 8] strides = [0, 1] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @slice_dynamic_not_whole(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+2 {{'sd.slice' op dynamic dimension 0 must be taken whole (start 0, limit -1, stride 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.slice %x start = [0, 0] limit = [2, 8] strides = [1, 1] : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @concat_no_input() -> tensor<4xf32> {
  // expected-error @+2 {{'sd.concat' op needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.concat dim = 0 : () -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @concat_rank(%a: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{'sd.concat' op input #1 of type 'tensor<4xf32>' does not match the rank and element type of 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.concat %a, %b dim = 0 : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @concat_element_type(%a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<8xf32> {
  // expected-error @+2 {{'sd.concat' op input #1 of type 'tensor<4xbf16>' does not match the rank and element type of 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.concat %a, %b dim = 0 : (tensor<4xf32>, tensor<4xbf16>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @concat_dim(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'sd.concat' op dim 1 is out of range for rank 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.concat %a, %a dim = 1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @concat_other_dim(%a: tensor<4x8xf32>, %b: tensor<4x6xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{'sd.concat' op input #1 has size 6 in dimension 1 where input #0 has 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.concat %a, %b dim = 0 : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @pad_entries(%x: tensor<4x8xf32>) -> tensor<6x8xf32> {
  // expected-error @+2 {{'sd.pad' op low and high need 2 entries each (one per dimension)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.pad %x low = [1] high = [1, 0] : (tensor<4x8xf32>) -> tensor<6x8xf32>
  return %y : tensor<6x8xf32>
}

// -----

func.func @pad_negative(%x: tensor<4x8xf32>) -> tensor<4x7xf32> {
  // expected-error @+2 {{'sd.pad' op padding of dimension 1 must not be negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.pad %x low = [0, -1] high = [0, 0] : (tensor<4x8xf32>) -> tensor<4x7xf32>
  return %y : tensor<4x7xf32>
}

//===----------------------------------------------------------------------===//
// sd.dot_general
//===----------------------------------------------------------------------===//

// -----

func.func @dot_batch_lengths(%a: tensor<2x4x8xf32>, %b: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
  // expected-error @+2 {{'sd.dot_general' op batch dimension lists [0] and [] have different lengths}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [0] x [] contract = [2] x [1] : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

func.func @dot_contract_lengths(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'sd.dot_general' op contracting dimension lists [1] and [0, 1] have different lengths}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [] x [] contract = [1] x [0, 1] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @dot_dim_out_of_range(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'sd.dot_general' op rhs batch and contracting dimensions [2] has a dimension out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [] x [] contract = [1] x [2] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @dot_dim_twice(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'sd.dot_general' op lhs batch and contracting dimensions [0, 0] lists dimension 0 twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [0] x [0] contract = [0] x [1] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @dot_sizes(%a: tensor<4x8xf32>, %b: tensor<6x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'sd.dot_general' op lhs dimension 1 of size 8 does not match rhs dimension 0 of size 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [] x [] contract = [1] x [0] : (tensor<4x8xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @dot_operand_types(%a: tensor<4x8xbf16>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'sd.dot_general' op operand element types 'bf16' and 'f32' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [] x [] contract = [1] x [0] : (tensor<4x8xbf16>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// f32 operands do not produce a bf16 result: only accumulation widens.
func.func @dot_result_type(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xbf16> {
  // expected-error @+2 {{'sd.dot_general' op inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<4x4xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.dot_general %a, %b batch = [] x [] contract = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

// -----

func.func @layer_norm_rank(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{'sd.layer_norm' op operand must have rank at least 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.layer_norm %x : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @layer_norm_scale_size(%x: tensor<2x8xf32>, %s: tensor<4xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'sd.layer_norm' op scale must be a 1-D tensor of 8 'f32', not 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.layer_norm %x scale %s : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @layer_norm_bias_type(%x: tensor<2x8xf32>, %b: tensor<8xbf16>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'sd.layer_norm' op bias must be a 1-D tensor of 8 'f32', not 'tensor<8xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.layer_norm %x bias %b : (tensor<2x8xf32>, tensor<8xbf16>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'sd.layer_norm' op epsilon must be positive, not 0.000000e+00}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.layer_norm %x {epsilon = 0.0} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @rms_norm_rank(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{'sd.rms_norm' op operand must have rank at least 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.rms_norm %x : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @rms_norm_scale(%x: tensor<2x8xf32>, %s: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'sd.rms_norm' op scale must be a 1-D tensor of 8 'f32', not 'tensor<2x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.rms_norm %x scale %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @rms_norm_epsilon(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'sd.rms_norm' op epsilon must be positive, not -1.000000e-06}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.rms_norm %x {epsilon = -1.0e-6} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @group_norm_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'sd.group_norm' op operand must have rank at least 2 ([N, ..., C])}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.group_norm %x groups = 2 : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @group_norm_groups_divide(%x: tensor<2x4x4x64xf32>) -> tensor<2x4x4x64xf32> {
  // expected-error @+2 {{'sd.group_norm' op groups = 24 must be positive and divide the 64 channels}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.group_norm %x groups = 24 : (tensor<2x4x4x64xf32>) -> tensor<2x4x4x64xf32>
  return %y : tensor<2x4x4x64xf32>
}

// -----

func.func @group_norm_groups_positive(%x: tensor<2x4x4x64xf32>) -> tensor<2x4x4x64xf32> {
  // expected-error @+2 {{'sd.group_norm' op groups = 0 must be positive and divide the 64 channels}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.group_norm %x groups = 0 : (tensor<2x4x4x64xf32>) -> tensor<2x4x4x64xf32>
  return %y : tensor<2x4x4x64xf32>
}

// -----

func.func @group_norm_scale(%x: tensor<2x4x4x64xf32>, %s: tensor<32xf32>) -> tensor<2x4x4x64xf32> {
  // expected-error @+2 {{'sd.group_norm' op scale must be a 1-D tensor of 64 'f32', not 'tensor<32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.group_norm %x scale %s groups = 32 : (tensor<2x4x4x64xf32>, tensor<32xf32>) -> tensor<2x4x4x64xf32>
  return %y : tensor<2x4x4x64xf32>
}

// -----

func.func @group_norm_bias(%x: tensor<2x4x4x64xf32>, %b: tensor<64xbf16>) -> tensor<2x4x4x64xf32> {
  // expected-error @+2 {{'sd.group_norm' op bias must be a 1-D tensor of 64 'f32', not 'tensor<64xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.group_norm %x bias %b groups = 32 : (tensor<2x4x4x64xf32>, tensor<64xbf16>) -> tensor<2x4x4x64xf32>
  return %y : tensor<2x4x4x64xf32>
}

// -----

func.func @group_norm_epsilon(%x: tensor<2x4x4x64xf32>) -> tensor<2x4x4x64xf32> {
  // expected-error @+2 {{'sd.group_norm' op epsilon must be positive, not 0.000000e+00}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.group_norm %x groups = 32 {epsilon = 0.0} : (tensor<2x4x4x64xf32>) -> tensor<2x4x4x64xf32>
  return %y : tensor<2x4x4x64xf32>
}

// -----

func.func @softmax_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.softmax' op dim 2 is out of range for rank 2}}
  %y = sd.softmax %x dim = 2 : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// sd.attention
//===----------------------------------------------------------------------===//

// -----

func.func @attention_rank(%q: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  // expected-error @+2 {{'sd.attention' op query, key and value must have rank 4 ([batch, heads, length, head_dim])}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %q, %q : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

func.func @attention_element_type(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xbf16>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'sd.attention' op query, key and value must have one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %k, %q : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_batch(%q: tensor<2x4x16x8xf32>, %k: tensor<3x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'sd.attention' op query and key batch sizes 2 and 3 differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %k, %k : (tensor<2x4x16x8xf32>, tensor<3x4x16x8xf32>, tensor<3x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_heads(%q: tensor<2x4x16x8xf32>, %v: tensor<2x6x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'sd.attention' op query and value head sizes 4 and 6 differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %q, %v : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x6x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_kv_length(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x77x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'sd.attention' op key and value length sizes 77 and 16 differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %k, %q : (tensor<2x4x16x8xf32>, tensor<2x4x77x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32> {
  // expected-error @+2 {{'sd.attention' op query and key head_dim sizes 8 and 16 differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %k, %k : (tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  return %y : tensor<2x4x16x16xf32>
}

// -----

// The mask is [B or 1, H or 1, Sq, Skv]: here Sq and Skv are swapped.
func.func @attention_mask(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>, %m: tensor<1x1x32x16xi1>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'sd.attention' op mask of type 'tensor<1x1x32x16xi1>' must be [batch or 1, heads or 1, query length, key length]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %k, %k mask %m : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>, tensor<1x1x32x16xi1>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_scale(%q: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'sd.attention' op scale must be positive, not 0.000000e+00}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.attention %q, %q, %q scale = 0.0 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

//===----------------------------------------------------------------------===//
// sd.conv2d, sd.upsample_nearest
//===----------------------------------------------------------------------===//

// -----

func.func @conv_rank(%x: tensor<2x8x8xf32>, %w: tensor<3x3x8x4xf32>) -> tensor<2x6x6x4xf32> {
  // expected-error @+2 {{'sd.conv2d' op input ([N, H, W, Cin]) and kernel ([KH, KW, Cin/groups, Cout]) must have rank 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x8x8xf32>, tensor<3x3x8x4xf32>) -> tensor<2x6x6x4xf32>
  return %y : tensor<2x6x6x4xf32>
}

// -----

func.func @conv_element_type(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x4xbf16>) -> tensor<2x6x6x4xf32> {
  // expected-error @+2 {{'sd.conv2d' op input and kernel element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x8x8x4xf32>, tensor<3x3x4x4xbf16>) -> tensor<2x6x6x4xf32>
  return %y : tensor<2x6x6x4xf32>
}

// -----

// A filter gradient may be f32 from bf16 operands (its f32 sum), not the
// other way round.
func.func @conv_filter_grad_element_type(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x6x6x4xf32>) -> tensor<3x3x4x4xbf16> {
  // expected-error @+1 {{'sd.conv2d_filter_grad' op input and kernel element types differ}}
  %dw = sd.conv2d_filter_grad %x, %dy strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x8x8x4xf32>, tensor<2x6x6x4xf32>) -> tensor<3x3x4x4xbf16>
  return %dw : tensor<3x3x4x4xbf16>
}

// -----

func.func @conv_strides(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x4xf32>) -> tensor<2x6x6x4xf32> {
  // expected-error @+2 {{'sd.conv2d' op strides [1, 0] must be 2 positive numbers}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 0] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x8x8x4xf32>, tensor<3x3x4x4xf32>) -> tensor<2x6x6x4xf32>
  return %y : tensor<2x6x6x4xf32>
}

// -----

func.func @conv_padding(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x4xf32>) -> tensor<2x6x6x4xf32> {
  // expected-error @+2 {{'sd.conv2d' op padding [1, 1] must be 4 non-negative numbers [top, bottom, left, right]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [1, 1] groups = 1 : (tensor<2x8x8x4xf32>, tensor<3x3x4x4xf32>) -> tensor<2x6x6x4xf32>
  return %y : tensor<2x6x6x4xf32>
}

// -----

func.func @conv_groups(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x2x6xf32>) -> tensor<2x6x6x6xf32> {
  // expected-error @+2 {{'sd.conv2d' op groups = 4 must be positive and divide Cin = 4 and Cout = 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 4 : (tensor<2x8x8x4xf32>, tensor<3x3x2x6xf32>) -> tensor<2x6x6x6xf32>
  return %y : tensor<2x6x6x6xf32>
}

// -----

func.func @conv_kernel_channels(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x8xf32>) -> tensor<2x6x6x8xf32> {
  // expected-error @+2 {{'sd.conv2d' op kernel input channels 4 must be Cin/groups = 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 2 : (tensor<2x8x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x6x6x8xf32>
  return %y : tensor<2x6x6x8xf32>
}

// -----

func.func @conv_bias(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x8xf32>, %b: tensor<4xf32>) -> tensor<2x6x6x8xf32> {
  // expected-error @+2 {{'sd.conv2d' op bias must be a 1-D tensor of 8 'f32', not 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w bias %b strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x8x8x4xf32>, tensor<3x3x4x8xf32>, tensor<4xf32>) -> tensor<2x6x6x8xf32>
  return %y : tensor<2x6x6x8xf32>
}

// -----

func.func @conv_kernel_too_large(%x: tensor<2x2x8x4xf32>, %w: tensor<3x3x4x8xf32>) -> tensor<2x1x6x8xf32> {
  // expected-error @+2 {{'sd.conv2d' op padded input size 2 is smaller than kernel size 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x2x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x1x6x8xf32>
  return %y : tensor<2x1x6x8xf32>
}

// -----

func.func @upsample_rank(%x: tensor<2x8x8xf32>) -> tensor<2x16x16xf32> {
  // expected-error @+2 {{'sd.upsample_nearest' op operand must have rank 4 ([N, H, W, C])}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.upsample_nearest %x scale = [2, 2] : (tensor<2x8x8xf32>) -> tensor<2x16x16xf32>
  return %y : tensor<2x16x16xf32>
}

// -----

func.func @upsample_scale(%x: tensor<2x8x8x4xf32>) -> tensor<2x16x8x4xf32> {
  // expected-error @+2 {{'sd.upsample_nearest' op scale [2, 0] must be 2 positive numbers}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sd.upsample_nearest %x scale = [2, 0] : (tensor<2x8x8x4xf32>) -> tensor<2x16x8x4xf32>
  return %y : tensor<2x16x8x4xf32>
}

//===----------------------------------------------------------------------===//
// Constants and random numbers
//===----------------------------------------------------------------------===//

// -----

// A dense literal cannot have a dynamic type; a resource can.
func.func @constant_static() -> tensor<?xf32> {
  // expected-error @+1 {{'sd.constant' op result type 'tensor<?xf32>' must be static}}
  %y = sd.constant dense_resource<blob> : tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

func.func @iota_static() -> tensor<?x4xf32> {
  // expected-error @+1 {{'sd.iota' op result type 'tensor<?x4xf32>' must be static}}
  %y = sd.iota dim = 1 : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @iota_dim() -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.iota' op dim 2 is out of range for rank 2}}
  %y = sd.iota dim = 2 : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

func.func @rng_normal_static() -> tensor<?xf32> {
  // expected-error @+1 {{'sd.rng_normal' op result type 'tensor<?xf32>' must be static}}
  %y = sd.rng_normal seed = 0 : tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

func.func @rng_normal_stddev() -> tensor<8xf32> {
  // expected-error @+1 {{'sd.rng_normal' op stddev must be positive, not 0.000000e+00}}
  %y = sd.rng_normal seed = 0 {stddev = 0.0} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @rng_uniform_static() -> tensor<?xf32> {
  // expected-error @+1 {{'sd.rng_uniform' op result type 'tensor<?xf32>' must be static}}
  %y = sd.rng_uniform seed = 0 : tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

func.func @rng_uniform_bounds() -> tensor<8xf32> {
  // expected-error @+1 {{'sd.rng_uniform' op low (1.000000e+00) must be below high (1.000000e+00)}}
  %y = sd.rng_uniform seed = 0 {low = 1.0, high = 1.0} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @rng_offsets_count(%a: tensor<f32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'sd.rng_normal' op offsets form needs one offset and one global_shape entry per dimension (rank 2), not 1 and 2}}
  %y = sd.rng_normal seed = 0 offsets(%a) global_shape = [8, 4] : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @rng_offsets_global(%a: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.rng_uniform' op global_shape dimension 0 of size 2 is smaller than the result's 4}}
  %y = sd.rng_uniform seed = 0 offsets(%a) global_shape = [2] : tensor<4xf32>
  return %y : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// sd.sharding_constraint
//===----------------------------------------------------------------------===//

// -----

func.func @constraint_empty(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op needs a sharding or logical axes}}
  %y = sd.sharding_constraint %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

func.func @constraint_logical_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op logical axes name 3 dimensions but the type is 'tensor<8x4xf32>'}}
  %y = sd.sharding_constraint %x logical = <[batch, _, embed]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

func.func @constraint_mesh_missing(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op sharding refers to @mesh, which is not an sd.mesh}}
  %y = sd.sharding_constraint %x sharding = <@mesh, [{}, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @constraint_sharding_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op sharding of the constrained value has 1 dimensions but the tensor has rank 2}}
  %y = sd.sharding_constraint %x sharding = <@mesh, [{"data"}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @constraint_unknown_axis(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op sharding of the constrained value names mesh axis "tensor", which mesh @mesh does not have}}
  %y = sd.sharding_constraint %x sharding = <@mesh, [{"data"}, {"tensor"}]> logical = <[batch, embed]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @constraint_axis_twice(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op sharding of the constrained value uses mesh axis "data" twice}}
  %y = sd.sharding_constraint %x sharding = <@mesh, [{"data"}, {}], replicated = ["data"]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

//===----------------------------------------------------------------------===//
// sd.adamw
//===----------------------------------------------------------------------===//

// -----

func.func @adamw_grad_type(%p: tensor<4xf32>, %g: tensor<8xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.adamw' op failed to verify that all of {param, grad, mu, nu, new_param, new_mu, new_nu} have same type}}
  %r:3 = "sd.adamw"(%p, %g, %p, %p, %s, %s, %s, %s, %s, %s, %s, %s) : (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

func.func @adamw_scalar(%p: tensor<4xf32>, %s: tensor<f32>, %v: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.adamw' op operand #4 must be 0D tensor of 32-bit float values}}
  %r:3 = "sd.adamw"(%p, %p, %p, %p, %v, %s, %s, %s, %s, %s, %s, %s) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

func.func @adamw_scalar_type(%p: tensor<4xbf16>, %s: tensor<f32>, %b: tensor<bf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'sd.adamw' op operand #11 must be 0D tensor of 32-bit float values}}
  %r:3 = "sd.adamw"(%p, %p, %p, %p, %s, %s, %s, %s, %s, %s, %s, %b) : (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<bf16>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  return %r#0 : tensor<4xbf16>
}

// -----

// sd.flash_attention, sd.flash_attention_dq, sd.flash_attention_dkv

func.func @flash_attention_block_size(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{flash block size block_kv_compute is 0; block sizes must be positive}}
  %o, %lse = sd.flash_attention %q, %q, %q scale = 0.5 blocks = <block_kv_compute = 0> : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  return %o : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_scale(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention' op scale must be positive, not 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = sd.flash_attention %q, %q, %q scale = 0.0 blocks = <> : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  return %o : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_dq_out(%q: tensor<1x2x16x8xf32>, %o: tensor<1x2x15x8xf32>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention_dq' op out of type 'tensor<1x2x15x8xf32>' must have the attention result's type 'tensor<1x2x16x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq = sd.flash_attention_dq %q, %q, %q, %o, %lse, %q scale = 0.5 blocks = <> : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x15x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %dq : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_dkv_d_out(%q: tensor<1x2x16x8xf32>, %lse: tensor<1x2x16xf32>, %do: tensor<1x2x16x4xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention_dkv' op d_out of type 'tensor<1x2x16x4xf32>' must have the attention result's type 'tensor<1x2x16x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dk, %dv = sd.flash_attention_dkv %q, %q, %q, %q, %lse, %do scale = 0.5 blocks = <> : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x4xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
  return %dk : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_dkv_lse(%q: tensor<1x2x16x8xf32>, %lse: tensor<1x2x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention_dkv' op logsumexp of type 'tensor<1x2x8xf32>' must be 'tensor<1x2x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dk, %dv = sd.flash_attention_dkv %q, %q, %q, %q, %lse, %q scale = 0.5 blocks = <> : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
  return %dk : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_context_parallel_mask(%q: tensor<1x2x16x8xf32>, %m: tensor<1x1x16x16xi1>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention' op with context_parallel takes no mask}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = sd.flash_attention %q, %q, %q mask %m scale = 0.5 blocks = <> context_parallel = ring : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x1x16x16xi1>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  return %o : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_dq_context_parallel_lengths(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x12x8xf32>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention_dq' op with context_parallel needs one sequence: query length 16 and key length 12 differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq = sd.flash_attention_dq %q, %k, %k, %q, %lse, %q scale = 0.5 blocks = <> context_parallel = ulysses : (tensor<1x2x16x8xf32>, tensor<1x2x12x8xf32>, tensor<1x2x12x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %dq : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_hybrid_without_shards(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention' op with context_parallel = ulysses_ring needs ulysses_shards}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = sd.flash_attention %q, %q, %q scale = 0.5 blocks = <> context_parallel = ulysses_ring : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  return %o : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_shards_without_hybrid(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention' op has ulysses_shards without context_parallel = ulysses_ring}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = sd.flash_attention %q, %q, %q scale = 0.5 blocks = <> context_parallel = ring ulysses_shards = 2 : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  return %o : tensor<1x2x16x8xf32>
}

// -----

func.func @flash_attention_shards_zero(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+2 {{'sd.flash_attention' op has ulysses_shards = 0; it must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %lse = sd.flash_attention %q, %q, %q scale = 0.5 blocks = <> context_parallel = ulysses_ring ulysses_shards = 0 : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  return %o : tensor<1x2x16x8xf32>
}
