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

// -----

// A @loss that calls itself would be inlined forever.
module {
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  // expected-error @below {{'func.call' op makes @loss recursive (@loss -> @loss); sd-differentiate inlines every call, so the program must not be recursive}}
  %l = call @loss(%w) : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
}

// -----

// So would layers that call each other; the message names the cycle.
module {
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  %y = call @block(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %l = sd.mse_loss %y, %w : tensor<4xf32>
  return %l : tensor<f32>
}
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @attention(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @attention(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = sd.exp %x : tensor<4xf32>
  // expected-error @below {{'func.call' op makes @loss recursive (@block -> @attention -> @block); sd-differentiate inlines every call, so the program must not be recursive}}
  %y = call @block(%e) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
}

// -----

// A call tree that doubles at each of 24 levels: 2^24 + 1 ops once inlined.
module {
// expected-error @below {{'func.func' op would have 16777217 ops once its calls are inlined; sd-differentiate takes at most 10000000}}
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  %y = call @f0(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %l = sd.mse_loss %y, %w : tensor<4xf32>
  return %l : tensor<f32>
}
func.func private @f0(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f1(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f1(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f1(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f2(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f2(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f2(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f3(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f3(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f3(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f4(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f4(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f4(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f5(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f5(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f5(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f6(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f6(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f6(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f7(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f7(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f7(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f8(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f8(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f8(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f9(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f9(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f9(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f10(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f10(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f10(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f11(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f11(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f11(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f12(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f12(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f12(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f13(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f13(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f13(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f14(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f14(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f14(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f15(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f15(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f15(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f16(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f16(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f16(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f17(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f17(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f17(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f18(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f18(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f18(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f19(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f19(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f19(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f20(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f20(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f20(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f21(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f21(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f21(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f22(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f22(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f22(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f23(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f23(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f23(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @f24(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @f24(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
func.func private @f24(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = sd.exp %x : tensor<4xf32>
  return %e : tensor<4xf32>
}
}
