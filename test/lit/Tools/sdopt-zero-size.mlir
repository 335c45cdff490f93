// A zero-size dimension is named as such, not sent back to
// sd-specialize-batch, which has run.
// RUN: not sdopt %s --mesh=data:2 2>&1 | FileCheck %s
// CHECK: error: 'sd.dot_general' op has no sharding rule while operand #0 has type 'tensor<0x16xf32>' with a zero-size dimension; sd needs non-empty tensors
// CHECK-NOT: sd-specialize-batch

func.func @loss(%w: tensor<16x32xf32> {sd.role = #sd.param<"proj.weight", xavier_uniform>,
                                       sd.logical_axes = #sd.logical_axes<[embed, mlp]>},
                %x: tensor<0x16xf32> {sd.role = #sd.input<latents>,
                                      sd.logical_axes = #sd.logical_axes<[batch, embed]>},
                %t: tensor<0x32xf32> {sd.role = #sd.input<noise>,
                                      sd.logical_axes = #sd.logical_axes<[batch, mlp]>})
    -> tensor<f32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.name = "ffn_activation"}
      : (tensor<0x16xf32>, tensor<16x32xf32>) -> tensor<0x32xf32>
  %l = sd.mse_loss %y, %t : tensor<0x32xf32>
  return %l : tensor<f32>
}
