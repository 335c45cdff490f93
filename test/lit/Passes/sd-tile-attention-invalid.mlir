// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="block-kv=-4"

// A negative block size is an error naming the option.
func.func @negative_block(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{flash block size block-kv is -4; block sizes must be positive (0 derives one)}}
  %o = sd.attention %q, %q, %q : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}
