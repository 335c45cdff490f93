// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-differentiate | FileCheck %s

// A linear model: the forward ops are numbered (their VJP groups); the
// backward program starts with the seed and runs the groups in reverse.
// The gradient of w contracts the batch of x with the cotangent of y; the
// input x gets none.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: (%[[W:[a-z0-9]+]]: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>}, %[[X:[a-z0-9]+]]: tensor<8x4xf32> {sd.role = #sd.input<latents>}, %[[T:[a-z0-9]+]]: tensor<8x3xf32> {sd.role = #sd.input<noise>}) -> (tensor<f32>, tensor<4x3xf32>) {
// CHECK-NEXT: %[[Y:.*]] = sd.dot_general %[[X]], %[[W]] {{.*}} {sd.vjp_group = 0 : i64}
// CHECK-NEXT: %[[L:.*]] = sd.mse_loss %[[Y]], %[[T]] {sd.vjp_group = 1 : i64}
// CHECK-NEXT: %[[SEED:.*]] = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
// CHECK: sd.mul %[[SEED]], %{{.*}} {sd.backward, sd.vjp_group = 1 : i64}
// CHECK: %[[DIFF:.*]] = sd.sub %[[Y]], %[[T]] {sd.backward, sd.vjp_group = 1 : i64}
// CHECK-NEXT: %[[DY:.*]] = sd.mul %[[DIFF]], %{{.*}} {sd.backward, sd.vjp_group = 1 : i64}
// CHECK-NEXT: %[[G:.*]] = sd.dot_general %[[DY]], %[[X]] batch = [] x [] contract = [0] x [0] {sd.backward, sd.vjp_group = 0 : i64}
// CHECK-NEXT: %[[DW:.*]] = sd.transpose %[[G]] permutation = [1, 0] {sd.backward, sd.vjp_group = 0 : i64}
// CHECK-NEXT: return %[[L]], %[[DW]] : tensor<f32>, tensor<4x3xf32>
// CHECK-NOT: func.func @loss(
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>},
                %t: tensor<8x3xf32> {sd.role = #sd.input<noise>}) -> tensor<f32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %l = sd.mse_loss %y, %t : tensor<8x3xf32>
  return %l : tensor<f32>
}

// -----

// The layer function is inlined and removed; its ops record their layer,
// the function the layer's callee. tanh's VJP uses its own (forward)
// result. A parameter the loss does not use gets a zero gradient outside
// every VJP group.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: attributes {sd.layers = ["layer"]}
// CHECK-NEXT: %[[Y:.*]] = sd.dot_general {{.*}} {sd.layer = 1 : i64, sd.vjp_group = 0 : i64}
// CHECK-NEXT: %[[A:.*]] = sd.tanh %[[Y]] {sd.layer = 1 : i64, sd.vjp_group = 1 : i64}
// CHECK-NEXT: %[[L:.*]] = sd.mse_loss %[[A]], %{{.*}} {sd.vjp_group = 2 : i64}
// CHECK: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 1 : i64}
// CHECK: %[[DW:.*]] = sd.transpose {{.*}} {sd.backward, sd.vjp_group = 0 : i64}
// CHECK-NEXT: %[[Z:.*]] = sd.constant {sd.backward} dense<0.000000e+00> : tensor<2xf32>
// CHECK-NEXT: return %[[L]], %[[DW]], %[[Z]]
// CHECK-NOT: func.func private @layer
func.func private @layer(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %a = sd.tanh %y : tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}
func.func @loss(%w: tensor<4x4xf32> {sd.role = #sd.param<"w", zeros>},
                %unused: tensor<2xf32> {sd.role = #sd.param<"unused", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %y = call @layer(%x, %w) : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %l = sd.mse_loss %y, %x : tensor<8x4xf32>
  return %l : tensor<f32>
}

// -----

// A bf16 op whose derivative is a chain of arithmetic (sigmoid's
// y·(1 − y)) gets it in f32: its result and cotangent widened by converts
// marked sd.derivative (sd-widen-gradients leaves them), the chain in f32,
// the operand's cotangent rounded to bf16 once.
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[S:.*]] = sd.sigmoid %{{.*}} {sd.vjp_group = 3 : i64} : tensor<8x3xbf16>
// CHECK: %[[DS:.*]] = sd.convert %{{.*}} {sd.backward, sd.vjp_group = 4 : i64} : tensor<8x3xf32> -> tensor<8x3xbf16>
// CHECK-NEXT: %[[YW:.*]] = sd.convert %[[S]] {sd.backward, sd.derivative, sd.vjp_group = 3 : i64} : tensor<8x3xbf16> -> tensor<8x3xf32>
// CHECK-NEXT: %[[DW:.*]] = sd.convert %[[DS]] {sd.backward, sd.derivative, sd.vjp_group = 3 : i64} : tensor<8x3xbf16> -> tensor<8x3xf32>
// CHECK-NEXT: %[[ONE:.*]] = sd.constant {{.*}} : tensor<8x3xf32>
// CHECK-NEXT: %[[C:.*]] = sd.sub %[[ONE]], %[[YW]] {{.*}} : tensor<8x3xf32>
// CHECK-NEXT: %[[P:.*]] = sd.mul %[[YW]], %[[C]] {{.*}} : tensor<8x3xf32>
// CHECK-NEXT: %[[G:.*]] = sd.mul %[[DW]], %[[P]] {{.*}} : tensor<8x3xf32>
// CHECK-NEXT: %[[DY:.*]] = sd.convert %[[G]] {sd.backward, sd.vjp_group = 3 : i64} : tensor<8x3xf32> -> tensor<8x3xbf16>
// CHECK-NEXT: sd.dot_general %[[DY]]
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>},
                %t: tensor<8x3xf32> {sd.role = #sd.input<noise>}) -> tensor<f32> {
  %wb = sd.convert %w : tensor<4x3xf32> -> tensor<4x3xbf16>
  %xb = sd.convert %x : tensor<8x4xf32> -> tensor<8x4xbf16>
  %y = sd.dot_general %xb, %wb batch = [] x [] contract = [1] x [0] : (tensor<8x4xbf16>, tensor<4x3xbf16>) -> tensor<8x3xbf16>
  %s = sd.sigmoid %y : tensor<8x3xbf16>
  %sf = sd.convert %s : tensor<8x3xbf16> -> tensor<8x3xf32>
  %l = sd.mse_loss %sf, %t : tensor<8x3xf32>
  return %l : tensor<f32>
}
