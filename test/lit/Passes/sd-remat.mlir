// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-remat="remat=NONE" | FileCheck %s --check-prefix=NONE
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-remat="remat=FULL" | FileCheck %s --check-prefix=FULL
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-remat="remat=OFFLOAD_MATMUL_WITHOUT_BATCH" | FileCheck %s --check-prefix=OFFLOAD

// A gradient function as sd-differentiate makes it: one layer (a
// projection, an activation, its square) and the loss. Groups 2 and 1 (the
// square's and tanh's VJPs) need the activation %a, which only the layer
// uses; the layer's output %h is kept under every policy (the loss uses it).
func.func @loss_grad(%w: tensor<8x8xf32> {sd.role = #sd.param<"w", zeros>},
                     %x: tensor<4x8xf32> {sd.role = #sd.input<latents>}) -> (tensor<f32>, tensor<8x8xf32>) attributes {sd.layers = ["block"]} {
  %q = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.layer = 1 : i64, sd.name = "query_proj", sd.vjp_group = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = sd.tanh %q {sd.layer = 1 : i64, sd.vjp_group = 1 : i64} : tensor<4x8xf32>
  %h = sd.mul %a, %a {sd.layer = 1 : i64, sd.vjp_group = 2 : i64} : tensor<4x8xf32>
  %l = sd.mse_loss %h, %x {sd.vjp_group = 3 : i64} : tensor<4x8xf32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %dh = sd.broadcast_in_dim %seed dims = [] {sd.backward, sd.vjp_group = 3 : i64} : (tensor<f32>) -> tensor<4x8xf32>
  %da0 = sd.mul %dh, %a {sd.backward, sd.vjp_group = 2 : i64} : tensor<4x8xf32>
  %da = sd.add %da0, %da0 {sd.backward, sd.vjp_group = 2 : i64} : tensor<4x8xf32>
  %sq = sd.mul %a, %a {sd.backward, sd.vjp_group = 1 : i64} : tensor<4x8xf32>
  %dq = sd.mul %da, %sq {sd.backward, sd.vjp_group = 1 : i64} : tensor<4x8xf32>
  %g = sd.dot_general %dq, %x batch = [] x [] contract = [0] x [0] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dw = sd.transpose %g permutation = [1, 0] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %l, %dw : tensor<f32>, tensor<8x8xf32>
}

// NONE keeps %a: the VJPs use it; the layers are dropped.
// NONE-LABEL: func.func @loss_grad
// NONE-SAME: -> (tensor<f32>, tensor<8x8xf32>) {
// NONE: %[[A:.*]] = sd.tanh %{{.*}} {sd.vjp_group = 1 : i64}
// NONE: sd.mul %{{.*}}, %[[A]] {sd.backward, sd.vjp_group = 2 : i64}
// NONE: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 1 : i64}
// NONE-NOT: sd.recompute

// FULL recomputes %a, and the projection it needs, once, just before the
// first group that uses it (group 2), in that group.
// FULL-LABEL: func.func @loss_grad
// FULL-SAME: (%[[W:.*]]: tensor<8x8xf32> {{.*}}, %[[X:.*]]: tensor<4x8xf32> {{.*}}) -> (tensor<f32>, tensor<8x8xf32>) {
// FULL: %[[H:.*]] = sd.mul {{.*}} {sd.vjp_group = 2 : i64}
// FULL: %[[DH:.*]] = sd.broadcast_in_dim {{.*}} {sd.backward, sd.vjp_group = 3 : i64}
// FULL-NEXT: %[[Q:.*]] = sd.dot_general %[[X]], %[[W]] {{.*}} {sd.backward, sd.name = "query_proj", sd.recompute, sd.vjp_group = 2 : i64}
// FULL-NEXT: %[[A:.*]] = sd.tanh %[[Q]] {sd.backward, sd.recompute, sd.vjp_group = 2 : i64}
// FULL-NEXT: sd.mul %[[DH]], %[[A]] {sd.backward, sd.vjp_group = 2 : i64}
// FULL: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 1 : i64}
// FULL-NOT: sd.recompute

// OFFLOAD_MATMUL_WITHOUT_BATCH offloads the projection (a matmul without
// batch dimensions) as soon as it is computed, reloads it for group 2 and
// recomputes %a from it.
// OFFLOAD-LABEL: func.func @loss_grad
// OFFLOAD: %[[Q:.*]] = sd.dot_general {{.*}} {sd.name = "query_proj", sd.vjp_group = 0 : i64}
// OFFLOAD-NEXT: %[[HOST:.*]] = sd.offload %[[Q]] : tensor<4x8xf32>
// OFFLOAD: %[[R:.*]] = sd.reload %[[HOST]] {sd.backward, sd.vjp_group = 2 : i64}
// OFFLOAD-NEXT: %[[A:.*]] = sd.tanh %[[R]] {sd.backward, sd.recompute, sd.vjp_group = 2 : i64}
// OFFLOAD: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 1 : i64}

// -----

// A function without backward program is left as it is.
// NONE-LABEL: func.func @forward
// NONE-NEXT: sd.tanh %{{.*}} {sd.layer = 1 : i64} : tensor<4xf32>
// FULL-LABEL: func.func @forward
// FULL-NEXT: sd.tanh %{{.*}} {sd.layer = 1 : i64} : tensor<4xf32>
// OFFLOAD-LABEL: func.func @forward
// OFFLOAD-NEXT: sd.tanh %{{.*}} {sd.layer = 1 : i64} : tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = sd.tanh %x {sd.layer = 1 : i64} : tensor<4xf32>
  return %a : tensor<4xf32>
}
