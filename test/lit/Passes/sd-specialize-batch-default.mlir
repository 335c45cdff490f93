// RUN: sdopt %s -verify-diagnostics -sd-specialize-batch | FileCheck %s

// Without a batch option the function's sd.default_batch is used.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK: sd.exp %[[X]] : tensor<8x16xf32>
func.func @loss(%x: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {sd.default_batch = 8 : i64} {
  %e = sd.exp %x : tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}
