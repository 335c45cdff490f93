// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-fold-product-transposes | FileCheck %s

// A weight's gradient dy·x transposed into the weight's layout is x·dy.
// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME: %[[DY:[^:]*]]: tensor<8x4xf32>, %[[X:[^:]*]]: tensor<8x3xf32>
// CHECK-NEXT: %[[P:.*]] = sd.dot_general %[[X]], %[[DY]] batch = [] x [] contract = [0] x [0] {sd.backward} : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: return %[[P]]
func.func @weight_gradient(%dy: tensor<8x4xf32>, %x: tensor<8x3xf32>) -> tensor<3x4xf32> {
  %p = sd.dot_general %dy, %x batch = [] x [] contract = [0] x [0] {sd.backward} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %w = sd.transpose %p permutation = [1, 0] : (tensor<4x3xf32>) -> tensor<3x4xf32>
  return %w : tensor<3x4xf32>
}

// -----

// Through the all-reduces that sum it over the data axes, which keep their
// attributes; batch dimensions stay in front.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @through_all_reduces
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x8x4xf32>, %[[B:[^:]*]]: tensor<2x8x3x5xf32>
// CHECK-NEXT: %[[P:.*]] = sd.dot_general %[[B]], %[[A]] batch = [0] x [0] contract = [1] x [1] : (tensor<2x8x3x5xf32>, tensor<2x8x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT: %[[S:.*]] = sd.all_reduce %[[P]] @mesh axes = ["data"] {tag} : tensor<2x3x5x4xf32>
// CHECK-NEXT: %[[T:.*]] = sd.all_reduce %[[S]] @mesh axes = ["fsdp"] : tensor<2x3x5x4xf32>
// CHECK-NEXT: return %[[T]]
func.func @through_all_reduces(%a: tensor<2x8x4xf32>, %b: tensor<2x8x3x5xf32>) -> tensor<2x3x5x4xf32> {
  %p = sd.dot_general %a, %b batch = [0] x [0] contract = [1] x [1] : (tensor<2x8x4xf32>, tensor<2x8x3x5xf32>) -> tensor<2x4x3x5xf32>
  %s = sd.all_reduce %p @mesh axes = ["data"] {tag} : tensor<2x4x3x5xf32>
  %t = sd.all_reduce %s @mesh axes = ["fsdp"] : tensor<2x4x3x5xf32>
  %w = sd.transpose %t permutation = [0, 2, 3, 1] : (tensor<2x4x3x5xf32>) -> tensor<2x3x5x4xf32>
  return %w : tensor<2x3x5x4xf32>
}

// -----

// Left alone: a permutation that is not the swap of the free groups, a
// product with another user, an all-reduce with another user, and a
// transpose of something else.
sd.mesh @mesh = <["data"=2]>
// CHECK-LABEL: func.func @not_folded
// CHECK-COUNT-4: sd.transpose
// CHECK-NOT: sd.transpose
func.func @not_folded(%a: tensor<2x8x4xf32>, %b: tensor<2x8x3xf32>, %x: tensor<4x3xf32>) -> (tensor<4x2x3xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<4x3xf32>) {
  %p = sd.dot_general %a, %b batch = [0] x [0] contract = [1] x [1] : (tensor<2x8x4xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  %w = sd.transpose %p permutation = [1, 0, 2] : (tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
  %q = sd.dot_general %a, %b batch = [] x [] contract = [0, 1] x [0, 1] : (tensor<2x8x4xf32>, tensor<2x8x3xf32>) -> tensor<4x3xf32>
  %v = sd.transpose %q permutation = [1, 0] : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %r = sd.dot_general %a, %b batch = [] x [] contract = [0, 1] x [0, 1] : (tensor<2x8x4xf32>, tensor<2x8x3xf32>) -> tensor<4x3xf32>
  %s = sd.all_reduce %r @mesh axes = ["data"] : tensor<4x3xf32>
  %u = sd.transpose %s permutation = [1, 0] : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %y = sd.transpose %x permutation = [1, 0] : (tensor<4x3xf32>) -> tensor<3x4xf32>
  return %w, %v, %q, %u, %y, %s : tensor<4x2x3xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<4x3xf32>
}
