// A chain of 5000 block functions, each calling the next, is specialized
// without recursion (a recursive walk overflowed the stack).
// RUN: %python %S/Inputs/call_chain.py 5000 > %t.mlir
// RUN: sdopt %t.mlir -sd-specialize-batch | FileCheck %s

// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-LABEL: func.func @f4999
// CHECK: sd.exp %{{.*}} : tensor<2x4xf32>
