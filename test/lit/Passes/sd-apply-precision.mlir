// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-apply-precision="weights-dtype=bfloat16 activations-dtype=bfloat16" | FileCheck %s
// RUN: sdopt %s -split-input-file -sd-apply-precision="weights-dtype=bfloat16 activations-dtype=float32" 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// RUN: sdopt %s -split-input-file -sd-apply-precision | FileCheck %s --check-prefix=F32

// Each parameter is cast once, right before its first use (so that its
// gradient completes, and the train step updates it, where that use's
// backward ends); values that depend on one are computed in bf16 (an f32
// operand is cast where it meets them), through the block function; the
// timestep's sinusoids depend on none and stay f32; the loss takes the
// prediction widened and the f32 target.
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%[[H:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK: sd.dot_general %[[H]], %[[W]] {{.*}} -> tensor<4x8xbf16>
// CHECK: sd.layer_norm {{.*}} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: -> tensor<f32>
// CHECK: %[[S:.*]] = sd.sin %arg3 : tensor<4x4xf32>
// CHECK-NEXT: %[[W1:.*]] = sd.convert %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[SB:.*]] = sd.convert %[[S]] : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NEXT: %[[E:.*]] = sd.dot_general %[[SB]], %[[W1]] {{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: %[[W2:.*]] = sd.convert %arg1 : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[B:.*]] = call @block(%[[E]], %[[W2]]) : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[P:.*]] = sd.convert %[[B]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: sd.mse_loss %[[P]], %arg2 : tensor<4x8xf32>
// WEIGHTS: remark: mixed precision: weights bfloat16, activations float32: 2 parameters rounded to bf16 on their shards and computed in f32
// WEIGHTS-LABEL: func.func @loss
// WEIGHTS: %[[R:.*]] = sd.convert %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// WEIGHTS: %[[W:.*]] = sd.convert %[[R]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// WEIGHTS: sd.dot_general %{{.*}}, %[[W]] {{.*}} -> tensor<4x8xf32>
// F32-LABEL: func.func @loss
// F32-NOT: sd.convert
func.func private @block(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %y = sd.dot_general %h, %w batch = [] x [] contract = [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %n = sd.layer_norm %y : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
// expected-remark @+1 {{mixed precision: weights bfloat16, activations bfloat16: 2 parameters cast from their f32 master copies on their shards (a gather moves the cast), 3 ops computed in bf16 (accumulating in f32), 1 kept in f32 (they depend on no parameter), 4 converts in all; the loss is f32}}
func.func @loss(%w1: tensor<4x8xf32> {sd.role = #sd.param<"embed.weight", zeros>},
                %w2: tensor<8x8xf32> {sd.role = #sd.param<"block.weight", zeros>},
                %target: tensor<4x8xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4x4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32> {
  %s = sd.sin %t : tensor<4x4xf32>
  %e = sd.dot_general %s, %w1 batch = [] x [] contract = [1] x [0] : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = call @block(%e, %w2) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = sd.mse_loss %b, %target : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// An entry's results keep their declared types: a bf16 prediction returns
// widened.
// CHECK-LABEL: func.func @denoise
// CHECK-SAME: -> tensor<2x4xf32>
// CHECK: %[[Y:.*]] = sd.tanh %{{.*}} : tensor<2x4xbf16>
// CHECK: %[[R:.*]] = sd.convert %[[Y]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK: return %[[R]] : tensor<2x4xf32>
// expected-remark @+1 {{mixed precision}}
func.func @denoise(%w: tensor<2x4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<2x4xf32> {
  %y = sd.tanh %w : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
