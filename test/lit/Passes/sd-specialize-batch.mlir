// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-specialize-batch="batch=4" | FileCheck %s

// The batch reaches every op through type inference.
// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[E:.*]] = sd.exp %[[X]] : tensor<4x16xf32>
// CHECK: %[[R:.*]] = sd.reduce_sum %[[E]] dims = [1] : (tensor<4x16xf32>) -> tensor<4xf32>
// CHECK: sd.broadcast_in_dim %[[R]] dims = [0] : (tensor<4xf32>) -> tensor<4x16xf32>
func.func @elementwise(%x: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {sd.default_batch = 8 : i64} {
  %e = sd.exp %x : tensor<?x16xf32>
  %r = sd.reduce_sum %e dims = [1] : (tensor<?x16xf32>) -> tensor<?xf32>
  %b = sd.broadcast_in_dim %r dims = [0] : (tensor<?xf32>) -> tensor<?x16xf32>
  %y = sd.div %e, %b : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Reshape infers its one dynamic dimension from the element count; convert
// keeps its element type.
// CHECK-LABEL: func.func @reshape_convert
// CHECK: sd.reshape %{{.*}} : (tensor<4x6xf32>) -> tensor<4x2x3xf32>
// CHECK: sd.reshape %{{.*}} : (tensor<4x2x3xf32>) -> tensor<24xf32>
// CHECK: sd.convert %{{.*}} : tensor<24xf32> -> tensor<24xbf16>
func.func @reshape_convert(%x: tensor<?x6xf32>) -> tensor<?xbf16> {
  %r = sd.reshape %x : (tensor<?x6xf32>) -> tensor<?x2x3xf32>
  %f = sd.reshape %r : (tensor<?x2x3xf32>) -> tensor<?xf32>
  %c = sd.convert %f : tensor<?xf32> -> tensor<?xbf16>
  return %c : tensor<?xbf16>
}

// -----

// Block functions are specialized once through their calls.
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: sd.dot_general {{.*}} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<4x8xf32>
// CHECK: call @block({{.*}}) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: call @block({{.*}}) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: sd.mse_loss %{{.*}}, %{{.*}} : tensor<4x8xf32>
func.func private @block(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @loss(%w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %x: tensor<?x8xf32>) -> tensor<f32> {
  %h0 = call @block(%x, %w0) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %h1 = call @block(%h0, %w1) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %l = sd.mse_loss %h1, %x : tensor<?x8xf32>
  return %l : tensor<f32>
}

// -----

// A static program of the requested batch is left alone.
// CHECK-LABEL: func.func @already_static
// CHECK-SAME: tensor<4x2xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>}
func.func @already_static(%x: tensor<4x2xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>}) {
  return
}

// -----

// A batch dimension that only a broadcast creates takes the batch size.
// CHECK-LABEL: func.func @broadcast_creates_batch
// CHECK: sd.broadcast_in_dim %{{.*}} dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: sd.add %{{.*}}, %{{.*}} : tensor<4x16xf32>
func.func @broadcast_creates_batch(%x: tensor<?x16xf32>, %b: tensor<16xf32>) -> tensor<?x16xf32> {
  %bb = sd.broadcast_in_dim %b dims = [1] : (tensor<16xf32>) -> tensor<?x16xf32>
  %y = sd.add %x, %bb : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
