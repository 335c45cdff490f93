// RUN: sdopt %s -split-input-file -verify-diagnostics

// One case per constraint of the sd attributes and of the dialect's
// discardable attributes, and the parse errors of their custom syntax.
// Op constraints are in invalid.mlir.

//===----------------------------------------------------------------------===//
// #sd.mesh_axis, #sd.mesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{mesh axis name "2d" is not an identifier}}
sd.mesh @mesh = <["2d"=2]>

// -----

// expected-error @+1 {{mesh axis name "" is not an identifier}}
sd.mesh @mesh = <[""=2]>

// -----

// expected-error @+1 {{mesh axis "data" has size 0; sizes must be positive}}
sd.mesh @mesh = <["data"=0]>

// -----

// expected-error @+1 {{mesh axis "data" has DCN part 3, which does not divide its size 8}}
sd.mesh @mesh = <["data"=8(dcn=3)]>

// -----

// expected-error @+1 {{mesh axis "data" has DCN part 0, which does not divide its size 8}}
sd.mesh @mesh = <["data"=8(dcn=0)]>

// -----

// expected-error @+1 {{expected 'dcn'}}
sd.mesh @mesh = <["data"=8(ici=2)]>

// -----

// expected-error @+1 {{mesh axis "data" appears twice}}
sd.mesh @mesh = <["data"=2, "fsdp"=2, "data"=4]>

// -----

// The device count is bounded, so products of axis sizes cannot overflow
// (found by sd-fuzz-mlir: a SIGFPE in the sharding verifier).
// expected-error @+1 {{mesh has more than 1048576 devices, the most sd supports, by mesh axis "a"}}
sd.mesh @mesh = <["a"=4294967296, "b"=4294967296]>

//===----------------------------------------------------------------------===//
// #sd.sharding and its dimension shardings
//===----------------------------------------------------------------------===//

// -----

// A priority is `p` and a non-negative integer; a negative one cannot even be
// spelled.
sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{expected a priority such as 'p0'}}
func.func @priority_negative(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}p-1]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{expected a priority such as 'p0'}}
func.func @priority_bad_prefix(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}q1]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{expected a priority such as 'p0'}}
func.func @priority_no_number(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}p]>}) {
  return
}

// -----

// `?` must come last.
sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{expected '}'}}
func.func @open_not_last(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{?, "data"}]>}) {
  return
}

// -----

// expected-error @+1 {{sharding refers to @mesh, which is not an sd.mesh}}
func.func @mesh_missing(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{}]>}) {
  return
}

// -----

func.func private @mesh()
// expected-error @+1 {{sharding refers to @mesh, which is not an sd.mesh}}
func.func @mesh_not_a_mesh(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{}]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{sharding of argument #0 has 1 dimensions but the tensor has rank 2}}
func.func @sharding_rank(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{sharding of argument #0 ("w") names mesh axis "tensor", which mesh @mesh does not have}}
func.func @sharding_unknown_axis(%w: tensor<8x4xf32> {sd.role = #sd.param<"w", zeros>, sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 names mesh axis "fsdp", which mesh @mesh does not have}}
func.func @replicated_unknown_axis(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], replicated = ["fsdp"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 uses mesh axis "data" twice}}
func.func @axis_twice_in_dims(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor", "data"}]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 names mesh axis "fsdp", which mesh @mesh does not have}}
func.func @unreduced_unknown_axis(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], unreduced = ["fsdp"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 uses mesh axis "data" twice}}
func.func @axis_in_dim_and_unreduced(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], unreduced = ["data"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 uses mesh axis "tensor" twice}}
func.func @axis_replicated_and_unreduced(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], replicated = ["tensor"], unreduced = ["tensor"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{expected 'replicated' or 'unreduced', each at most once and in this order}}
func.func @unreduced_before_replicated(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["tensor"], replicated = ["data"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 uses mesh axis "data" twice}}
func.func @axis_in_dim_and_replicated(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], replicated = ["data"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
// expected-error @+1 {{sharding of argument #0 uses mesh axis "tensor" twice}}
func.func @axis_twice_replicated(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], replicated = ["tensor", "tensor"]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{sharding of argument #0 needs a ranked tensor, not 'f32'}}
func.func @sharding_not_tensor(%x: f32 {sd.sharding = #sd.sharding<@mesh, []>}) {
  return
}

// -----

// Result shardings are checked like argument shardings.
sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{sharding of result #1 has 1 dimensions but the tensor has rank 0}}
func.func @result_sharding_rank(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<f32> {sd.sharding = #sd.sharding<@mesh, [{}]>}) {
  %l = sd.mse_loss %x, %x : tensor<8xf32>
  return %x, %l : tensor<8xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{logical axis name "2d" is not an identifier}}
func.func @logical_not_identifier(%x: tensor<8x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, "2d"]>}) {
  return
}

// -----

// A bare name may contain `.` in MLIR's syntax, but not in a logical axis.
// expected-error @+1 {{logical axis name "embed.x" is not an identifier}}
func.func @logical_dotted(%x: tensor<8x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, embed.x]>}) {
  return
}

//===----------------------------------------------------------------------===//
// #sd.param, its initializer, and #sd.input
//===----------------------------------------------------------------------===//

// -----

// expected-error @+2 {{initializer 'normal' needs a positive scale, not 0.000000e+00}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @normal_zero_scale(%w: tensor<4xf32> {sd.role = #sd.param<"w", normal(0.0)>}) {
  return
}

// -----

// expected-error @+2 {{initializer 'uniform' needs a positive scale, not -1.000000e-01}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @uniform_negative_scale(%w: tensor<4xf32> {sd.role = #sd.param<"w", uniform(-0.1)>}) {
  return
}

// -----

// expected-error @+2 {{initializer 'zeros' takes no scale}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @zeros_with_scale(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros(1.0)>}) {
  return
}

// -----

// expected-error @+2 {{initializer 'ones' takes no scale}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @ones_with_scale(%w: tensor<4xf32> {sd.role = #sd.param<"w", ones(1.0)>}) {
  return
}

// -----

// expected-error @+2 {{initializer 'xavier_uniform' takes no scale}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @xavier_with_scale(%w: tensor<4x4xf32> {sd.role = #sd.param<"w", xavier_uniform(0.5)>}) {
  return
}

// -----

// expected-error @+2 {{initializer 'normal' needs a scale, e.g. normal(0.02)}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @normal_missing_scale(%w: tensor<4xf32> {sd.role = #sd.param<"w", normal>}) {
  return
}

// -----

// expected-error @+2 {{initializer 'constant' needs a scale, e.g. constant(0.02)}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @constant_missing_scale(%w: tensor<4xf32> {sd.role = #sd.param<"w", constant>}) {
  return
}

// -----

// expected-error @+2 {{unknown initializer 'kaiming'}}
// expected-error @+1 {{failed to parse SD_ParamAttr parameter 'init'}}
func.func @unknown_initializer(%w: tensor<4xf32> {sd.role = #sd.param<"w", kaiming>}) {
  return
}

// -----

// expected-error @+1 {{parameter name is empty}}
func.func @param_empty_name(%w: tensor<4xf32> {sd.role = #sd.param<"", zeros>}) {
  return
}

// -----

// expected-error @+1 {{stored shape of parameter "w" has a negative size}}
func.func @param_stored_negative(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros, stored[-4]>}) {
  return
}

// -----

// expected-error @+1 {{stored shape [192, 32] of argument #0 ("qkv") has 6144 elements but its type 'tensor<3x64x64xf32>' has 12288}}
func.func @param_stored_count(%w: tensor<3x64x64xf32> {sd.role = #sd.param<"qkv", zeros, stored[192, 32]>}) {
  return
}

// -----

// expected-error @+1 {{parameter name "blocks.0.w" is used by argument #0 and argument #2}}
func.func @param_duplicate_name(
    %a: tensor<4xf32> {sd.role = #sd.param<"blocks.0.w", zeros>},
    %b: tensor<4xf32> {sd.role = #sd.param<"blocks.1.w", zeros>},
    %c: tensor<4xf32> {sd.role = #sd.param<"blocks.0.w", ones>}) {
  return
}

// -----

// expected-error @+1 {{unknown input kind 'weights'; expected latents, noise, timestep, context, labels or step}}
func.func @unknown_input_kind(%x: tensor<4xf32> {sd.role = #sd.input<weights>}) {
  return
}

//===----------------------------------------------------------------------===//
// Discardable attributes: where they may appear and of which kind
//===----------------------------------------------------------------------===//

// -----

func.func @role_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.role' belongs on a function argument, not on an op}}
  %y = sd.neg %x {sd.role = #sd.input<latents>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @logical_axes_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.logical_axes' belongs on a function argument, not on an op}}
  %y = sd.neg %x {sd.logical_axes = #sd.logical_axes<[batch]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @sharding_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.sharding' on an op must be a #sd.sharding_per_value, not #sd.sharding<@mesh, [{"data"}]>}}
  %y = sd.neg %x {sd.sharding = #sd.sharding<@mesh, [{"data"}]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @per_value_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.sharding' has 2 shardings but the op has 1 results}}
  %y = sd.neg %x {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}]>, <@mesh, [{}]>]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @per_value_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sharding of result #0 has 2 dimensions but the tensor has rank 1}}
  %y = sd.neg %x {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @provenance_not_strings(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.provenance' must be an array of strings}}
  %y = sd.neg %x {sd.provenance = [1]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sd.role' belongs on a function argument, not on a result}}
func.func @role_on_result(%x: tensor<4xf32>) -> (tensor<4xf32> {sd.role = #sd.input<latents>}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sd.logical_axes' belongs on a function argument, not on a result}}
func.func @logical_axes_on_result(%x: tensor<4xf32>) -> (tensor<4xf32> {sd.logical_axes = #sd.logical_axes<[batch]>}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sd.role' of argument #0 must be #sd.param, #sd.input or #sd.optimizer_state, not #sd.logical_axes<[batch]>}}
func.func @role_wrong_kind(%x: tensor<4xf32> {sd.role = #sd.logical_axes<[batch]>}) {
  return
}

// -----

// expected-error @+1 {{'sd.logical_axes' of argument #0 ("w") must be #sd.logical_axes}}
func.func @logical_axes_wrong_kind(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>, sd.logical_axes = ["batch"]}) {
  return
}

// -----

// expected-error @+1 {{'sd.sharding' must be a #sd.sharding, not #sd.logical_axes<[batch]>}}
func.func @sharding_wrong_kind(%x: tensor<4xf32> {sd.sharding = #sd.logical_axes<[batch]>}) {
  return
}

// -----

// expected-error @+1 {{'sd.sharding' must be a #sd.sharding, not "data"}}
func.func @result_sharding_wrong_kind(%x: tensor<4xf32>) -> (tensor<4xf32> {sd.sharding = "data"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{logical axes of argument #0 name 2 dimensions but its type is 'tensor<8x4x4xf32>'}}
func.func @logical_axes_rank(%x: tensor<8x4x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, embed]>}) {
  return
}

// -----

// expected-error @+1 {{logical axes of argument #0 name 1 dimensions but its type is 'f32'}}
func.func @logical_axes_not_tensor(%x: f32 {sd.logical_axes = #sd.logical_axes<[batch]>}) {
  return
}

// -----

func.func @name_not_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.name' must be a string, not 3 : i64}}
  %y = sd.neg %x {sd.name = 3} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sd.default_batch' must be a positive integer on a function}}
func.func @default_batch_zero(%x: tensor<?x4xf32>) attributes {sd.default_batch = 0} {
  return
}

// -----

// expected-error @+1 {{'sd.default_batch' must be a positive integer on a function}}
func.func @default_batch_not_integer(%x: tensor<?x4xf32>) attributes {sd.default_batch = 8.0} {
  return
}

// -----

func.func @default_batch_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.default_batch' must be a positive integer on a function}}
  %y = sd.neg %x {sd.default_batch = 8} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sd.prediction_type' must be a #sd.prediction<epsilon|v_prediction|flow> on a function, not "flow"}}
func.func @prediction_type_string(%x: tensor<4xf32>) attributes {sd.prediction_type = "flow"} {
  return
}

// -----

// expected-error @+2 {{expected ::mlir::sd::PredictionType to be one of: epsilon, v_prediction, flow}}
// expected-error @+1 {{failed to parse SD_PredictionTypeAttr parameter 'value'}}
func.func @prediction_type_unknown(%x: tensor<4xf32>) attributes {sd.prediction_type = #sd.prediction<sample>} {
  return
}

// -----

func.func @prediction_type_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.prediction_type' must be a #sd.prediction<epsilon|v_prediction|flow> on a function, not #sd.prediction<flow>}}
  %y = sd.neg %x {sd.prediction_type = #sd.prediction<flow>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @vjp_group_not_integer(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.vjp_group' must be an integer, not "a"}}
  %y = sd.neg %x {sd.vjp_group = "a"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @layer_not_integer(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.layer' must be an integer, not "block"}}
  %y = sd.neg %x {sd.layer = "block"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @sample_block_not_on_call(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.sample_block' must be an array<i64: chain, position> of two non-negative integers on a call}}
  %y = sd.neg %x {sd.sample_block = array<i64: 0, 1>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func private @block(tensor<4xf32>) -> tensor<4xf32>
func.func @sample_block_negative(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.sample_block' must be an array<i64: chain, position> of two non-negative integers on a call}}
  %y = call @block(%x) {sd.sample_block = array<i64: 0, -1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func private @block(tensor<4xf32>) -> tensor<4xf32>
func.func @sample_block_one_number(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.sample_block' must be an array<i64: chain, position> of two non-negative integers on a call}}
  %y = call @block(%x) {sd.sample_block = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sd.layers' must be an array of strings on a function}}
func.func @layers_not_strings(%x: tensor<4xf32>) attributes {sd.layers = [1]} {
  return
}

// -----

func.func @layers_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sd.layers' must be an array of strings on a function}}
  %y = sd.neg %x {sd.layers = ["block"]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @unknown_op_attribute(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown sd attribute 'sd.remat'}}
  %y = sd.neg %x {sd.remat = true} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sd.frozen marks a parameter.
// expected-error @+1 {{'sd.frozen' of argument #0 must be a unit attribute on an #sd.param argument}}
func.func @frozen_input(%x: tensor<4xf32> {sd.frozen, sd.role = #sd.input<latents>}) {
  return
}

// -----

// expected-error @+1 {{'sd.frozen' of argument #0 ("w") must be a unit attribute on an #sd.param argument}}
func.func @frozen_not_unit(%x: tensor<4xf32> {sd.frozen = 1 : i64, sd.role = #sd.param<"w", zeros>}) {
  return
}

// -----

// expected-error @+1 {{unknown sd argument attribute 'sd.nmae'}}
func.func @unknown_argument_attribute(%x: tensor<4xf32> {sd.nmae = "x"}) {
  return
}

// -----

// expected-error @+1 {{unknown sd result attribute 'sd.name'}}
func.func @unknown_result_attribute(%x: tensor<4xf32>) -> (tensor<4xf32> {sd.name = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// sd.local_sharding (partitioned functions): checked against the global
// type, the local one times the axes.
sd.mesh @mesh = <["data"=4]>
// expected-error @+1 {{local sharding of argument #0 has 1 dimensions but its type is 'tensor<2x4xf32>'}}
func.func @local_sharding_rank(%x: tensor<2x4xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=4]>
// expected-error @+1 {{'sd.local_sharding' must be a #sd.sharding of a static tensor, not #sd.logical_axes<[batch]>}}
func.func @local_sharding_kind(%x: tensor<2xf32> {sd.local_sharding = #sd.logical_axes<[batch]>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=4]>
// expected-error @+1 {{sharding of result #0 names mesh axis "tensor", which mesh @mesh does not have}}
func.func @local_sharding_axis() -> (tensor<2xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"tensor"}]>}) {
  %c = sd.constant dense<1.0> : tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

// sd.global_shape (beside sd.local_sharding where a dimension is padded):
// each local dimension is a block of the global one.
sd.mesh @mesh = <["data"=4]>
// expected-error @+1 {{dimension 0 of argument #0 has 3 elements per device, not a block of its global 6 over 4 devices}}
func.func @global_shape_not_a_block(%x: tensor<3x4xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>, sd.global_shape = array<i64: 6, 4>}) {
  return
}

// -----

sd.mesh @mesh = <["data"=4]>
// expected-error @+1 {{'sd.global_shape' of result #0 must be an array of its 1 global sizes beside 'sd.local_sharding', not array<i64: 6, 4>}}
func.func @global_shape_rank() -> (tensor<2xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}]>, sd.global_shape = array<i64: 6, 4>}) {
  %c = sd.constant dense<1.0> : tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

// expected-error @+1 {{'sd.global_shape' of argument #0 must be an array of its 1 global sizes beside 'sd.local_sharding', not array<i64: 6>}}
func.func @global_shape_alone(%x: tensor<2xf32> {sd.global_shape = array<i64: 6>}) {
  return
}

// -----

// expected-error @+1 {{'sd.padding' must be an array of the padded and all elements on a function, not array<i64: 5, 4>}}
func.func @padding_more_than_all() attributes {sd.padding = array<i64: 5, 4>} {
  return
}
