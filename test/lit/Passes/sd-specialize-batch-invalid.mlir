// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-specialize-batch="batch=4"
// RUN: not sdopt %s -split-input-file -sd-specialize-batch="batch=-2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// NEGATIVE: error: batch -2 must be positive

// A program written for batch 8 cannot run batch 4.
// expected-error @+1 {{program is specialized to batch 8 (argument #0), not 4; generate it with a dynamic batch (sdgen) to choose the batch later}}
func.func @static_other_batch(%x: tensor<8x2xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>}) {
  return
}

// -----

// One block function cannot serve two batch sizes.
func.func private @block(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  return %x : tensor<?x8xf32>
}
func.func @loss(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %a = call @block(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %twice = sd.concat %x, %x dim = 0 : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  // expected-error @+1 {{@block is called with different argument types; block functions must be called with one batch size}}
  %b = call @block(%twice) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %a : tensor<?x8xf32>
}
