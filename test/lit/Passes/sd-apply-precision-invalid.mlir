// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-apply-precision="weights-dtype=bfloat16 activations-dtype=bfloat16"

// A block function is given one signature: a second call with other
// element types is an error.
func.func private @twice(%h: tensor<4xf32>) -> tensor<4xf32> {
  return %h : tensor<4xf32>
}
func.func @two_signatures(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = call @twice(%w) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'func.call' op calls @twice with other element types than an earlier call; sd-apply-precision gives a block function one signature}}
  %b = call @twice(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// A call of a function without a body: the pass cannot retype it.
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
func.func @calls_external(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op calls @external, which sd-apply-precision cannot see}}
  %a = call @external(%w) : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
