// RUN: sdopt %s -split-input-file -sd-widen-gradients | FileCheck %s

// A weight gradient made in bf16 and widened: the product gives f32
// directly, through the transpose and the sum of two uses; an operand that
// is neither (the tanh) is widened where the sum reads it.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[D1:.*]] = sd.dot_general %arg0, %arg1 {{.*}} {sd.backward} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xf32>
// CHECK: %[[D2:.*]] = sd.dot_general %arg0, %arg2 {{.*}} {sd.backward} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xf32>
// CHECK: %[[S:.*]] = sd.add %[[D1]], %[[D2]] {sd.backward} : tensor<4x6xf32>
// CHECK: %[[T:.*]] = sd.tanh %arg3 {sd.backward} : tensor<4x6xbf16>
// CHECK: %[[TW:.*]] = sd.convert %[[T]] {sd.backward} : tensor<4x6xbf16> -> tensor<4x6xf32>
// CHECK: %[[A:.*]] = sd.add %[[S]], %[[TW]] {sd.backward} : tensor<4x6xf32>
// CHECK: %[[G:.*]] = sd.transpose %[[A]] permutation = [1, 0] {sd.backward} : (tensor<4x6xf32>) -> tensor<6x4xf32>
// CHECK-NOT: sd.convert
// CHECK: return %[[G]]
func.func @weight_gradient(%x: tensor<8x4xbf16>, %dy1: tensor<8x6xbf16>, %dy2: tensor<8x6xbf16>, %z: tensor<4x6xbf16>) -> tensor<6x4xf32> {
  %d1 = sd.dot_general %x, %dy1 batch = [] x [] contract = [0] x [0] {sd.backward} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
  %d2 = sd.dot_general %x, %dy2 batch = [] x [] contract = [0] x [0] {sd.backward} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
  %s = sd.add %d1, %d2 {sd.backward} : tensor<4x6xbf16>
  %t = sd.tanh %z {sd.backward} : tensor<4x6xbf16>
  %a = sd.add %s, %t {sd.backward} : tensor<4x6xbf16>
  %g = sd.transpose %a permutation = [1, 0] {sd.backward} : (tensor<4x6xbf16>) -> tensor<6x4xbf16>
  %w = sd.convert %g {sd.backward} : tensor<6x4xbf16> -> tensor<6x4xf32>
  return %w : tensor<6x4xf32>
}

// -----

// A convolution's filter gradient: its products' f32 sum, unrounded.
// CHECK-LABEL: func.func @filter_gradient
// CHECK: %[[W:.*]] = sd.conv2d_filter_grad %arg0, %arg1 strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 {sd.backward} : (tensor<2x4x4x3xbf16>, tensor<2x4x4x5xbf16>) -> tensor<3x3x3x5xf32>
// CHECK-NEXT: return %[[W]]
func.func @filter_gradient(%x: tensor<2x4x4x3xbf16>, %dy: tensor<2x4x4x5xbf16>) -> tensor<3x3x3x5xf32> {
  %dw = sd.conv2d_filter_grad %x, %dy strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 {sd.backward} : (tensor<2x4x4x3xbf16>, tensor<2x4x4x5xbf16>) -> tensor<3x3x3x5xbf16>
  %w = sd.convert %dw {sd.backward} : tensor<3x3x3x5xbf16> -> tensor<3x3x3x5xf32>
  return %w : tensor<3x3x3x5xf32>
}

// -----

// A bias gradient: the reduction accumulates into an f32 result.
// CHECK-LABEL: func.func @bias_gradient
// CHECK: %[[R:.*]] = sd.reduce_sum %arg0 dims = [0] {sd.backward} : (tensor<8x6xbf16>) -> tensor<6xf32>
// CHECK-NEXT: return %[[R]]
func.func @bias_gradient(%dy: tensor<8x6xbf16>) -> tensor<6xf32> {
  %r = sd.reduce_sum %dy dims = [0] {sd.backward} : (tensor<8x6xbf16>) -> tensor<6xbf16>
  %w = sd.convert %r {sd.backward} : tensor<6xbf16> -> tensor<6xf32>
  return %w : tensor<6xf32>
}

// -----

// Left alone: a forward convert, a value with another user, and a producer
// that computes (tanh) rather than accumulates.
// CHECK-LABEL: func.func @left_alone
// CHECK: sd.dot_general {{.*}} -> tensor<4x6xbf16>
// CHECK: sd.convert %{{.*}} : tensor<4x6xbf16> -> tensor<4x6xf32>
// CHECK: %[[D:.*]] = sd.dot_general {{.*}} {sd.backward} {{.*}} -> tensor<4x6xbf16>
// CHECK: sd.convert %[[D]] {sd.backward} : tensor<4x6xbf16> -> tensor<4x6xf32>
// CHECK: %[[T:.*]] = sd.tanh
// CHECK: sd.convert %[[T]] {sd.backward} : tensor<4x6xbf16> -> tensor<4x6xf32>
func.func @left_alone(%x: tensor<8x4xbf16>, %dy: tensor<8x6xbf16>, %z: tensor<4x6xbf16>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xbf16>, tensor<4x6xf32>) {
  %f = sd.dot_general %x, %dy batch = [] x [] contract = [0] x [0] : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
  %fw = sd.convert %f : tensor<4x6xbf16> -> tensor<4x6xf32>
  %d = sd.dot_general %x, %dy batch = [] x [] contract = [0] x [0] {sd.backward} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
  %dw = sd.convert %d {sd.backward} : tensor<4x6xbf16> -> tensor<4x6xf32>
  %t = sd.tanh %z {sd.backward} : tensor<4x6xbf16>
  %tw = sd.convert %t {sd.backward} : tensor<4x6xbf16> -> tensor<4x6xf32>
  return %fw, %dw, %d, %tw : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xbf16>, tensor<4x6xf32>
}

// -----

// A convert that widens an activation's cotangent for a derivative computed
// in f32 (sd.derivative) is left alone: the product behind it stays bf16,
// and so does what the partitioner would reduce there.
// CHECK-LABEL: func.func @derivative_left_alone
// CHECK: %[[D:.*]] = sd.dot_general {{.*}} {sd.backward} {{.*}} -> tensor<8x6xbf16>
// CHECK: sd.convert %[[D]] {sd.backward, sd.derivative} : tensor<8x6xbf16> -> tensor<8x6xf32>
func.func @derivative_left_alone(%x: tensor<8x4xbf16>, %w: tensor<4x6xbf16>) -> tensor<8x6xf32> {
  %d = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.backward} : (tensor<8x4xbf16>, tensor<4x6xbf16>) -> tensor<8x6xbf16>
  %dw = sd.convert %d {sd.backward, sd.derivative} : tensor<8x6xbf16> -> tensor<8x6xf32>
  return %dw : tensor<8x6xf32>
}
