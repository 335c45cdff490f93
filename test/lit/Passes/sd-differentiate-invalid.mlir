// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-differentiate

// expected-error @below {{sd-differentiate needs a @loss function}}
module {
func.func @forward(%w: tensor<4xf32>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
}

// -----

module {
// expected-error @below {{'func.func' op must return one tensor<f32> loss to be differentiated, not 'tensor<4xf32>'}}
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
}

// -----

module {
// expected-error @below {{@loss has no #sd.param argument to train}}
func.func @loss(%x: tensor<4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %l = sd.mse_loss %x, %x : tensor<4xf32>
  return %l : tensor<f32>
}
}

// -----

module {
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  // expected-error @below {{'func.call' op calls @missing, which has no body to differentiate}}
  %y = call @missing(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %l = sd.mse_loss %y, %w : tensor<4xf32>
  return %l : tensor<f32>
}
func.func private @missing(tensor<4xf32>) -> tensor<4xf32>
}
