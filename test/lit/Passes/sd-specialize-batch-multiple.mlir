// RUN: sdopt %s -verify-diagnostics -split-input-file -sd-specialize-batch=batch-multiple=32 | FileCheck %s

// A default batch that does not divide the devices the batch is sharded
// over becomes the next multiple of them, with a remark.
// expected-remark @+1 {{batch 32 (the program's default 8 does not divide the 32 devices its batch dimension is sharded over; --batch=N sets another)}}
module {
// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<32x16xf32>) -> tensor<32x16xf32>
func.func @loss(%x: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {sd.default_batch = 8 : i64} {
  %e = sd.exp %x : tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}
}

// -----

// A default that divides them is kept.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<64x16xf32>) -> tensor<64x16xf32>
func.func @loss(%x: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {sd.default_batch = 64 : i64} {
  %e = sd.exp %x : tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}

// -----

// A block function that calls itself is an error, not an endless walk.
func.func @loss(%x: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {sd.default_batch = 64 : i64} {
  %e = func.call @block(%x) : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}
func.func @block(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'func.call' op calls @block recursively; block functions must not recurse}}
  %e = func.call @block(%x) : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}
