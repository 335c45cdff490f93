// RUN: sdopt %s --train --batch=4 --weights-dtype=bfloat16 --activations-dtype=bfloat16 2>/dev/null | FileCheck %s

// In bf16 each parameter is cast right before its first use, so its
// gradient (the cast's VJP widens it back to f32) completes where that
// use's backward ends, and the train step updates it there, as in f32: the
// output layer's weight is updated before the backward reaches the first
// layer, not after the whole backward with every gradient kept alive.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W1:.*]] = sd.convert %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: sd.dot_general %{{.*}}, %[[W1]]
// CHECK: %[[W2:.*]] = sd.convert %arg1 : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK: sd.dot_general %{{.*}}, %[[W2]]
// CHECK: sd.mse_loss
// The output weight's gradient, widened, and its update.
// CHECK: sd.convert %{{.*}} {sd.backward} : tensor<8x8xbf16> -> tensor<8x8xf32>
// CHECK: %[[NEW2:[^,]*]], {{.*}} = sd.adamw %arg1, {{.*}} : tensor<8x8xf32>
// Then the first layer's backward and the embedding weight's update.
// CHECK: sd.dot_general {{.*}} -> tensor<8x4xbf16>
// CHECK: %[[NEW1:[^,]*]], {{.*}} = sd.adamw %arg0, {{.*}} : tensor<4x8xf32>
// CHECK: return %{{.*}}, %[[NEW1]], %[[NEW2]],
func.func @loss(%w1: tensor<4x8xf32> {sd.role = #sd.param<"embed.weight", zeros>},
                %w2: tensor<8x8xf32> {sd.role = #sd.param<"out.weight", zeros>},
                %target: tensor<4x8xf32> {sd.role = #sd.input<latents>},
                %x: tensor<4x4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32> {
  %e = sd.dot_general %x, %w1 batch = [] x [] contract = [1] x [0] : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = sd.tanh %e : tensor<4x8xf32>
  %b = sd.dot_general %t, %w2 batch = [] x [] contract = [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = sd.mse_loss %b, %target : tensor<4x8xf32>
  return %l : tensor<f32>
}
