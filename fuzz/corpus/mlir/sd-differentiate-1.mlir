// A parameter the loss does not use gets a zero gradient; the layer
// function is inlined and removed.
// GRAD-LABEL: func.func @loss_grad
// GRAD: %[[Z:.*]] = sd.constant {sd.backward} dense<0.000000e+00> : tensor<2xf32>
// GRAD: return %{{.*}}, %{{.*}}, %[[Z]]
// GRAD-NOT: func.func private @layer
func.func private @layer(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %a = sd.tanh %y : tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}
func.func @loss(%w: tensor<4x4xf32> {sd.role = #sd.param<"w", zeros>},
                %unused: tensor<2xf32> {sd.role = #sd.param<"unused", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %y = call @layer(%x, %w) : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %l = sd.mse_loss %y, %x : tensor<8x4xf32>
  return %l : tensor<f32>
}
