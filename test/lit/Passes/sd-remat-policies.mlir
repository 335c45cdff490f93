// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=NONE" | FileCheck %s --check-prefix=NONE
// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=FULL" | FileCheck %s --check-prefix=FULL
// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=MATMUL_WITHOUT_BATCH" | FileCheck %s --check-prefix=MATMUL
// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=OFFLOAD_MATMUL_WITHOUT_BATCH" | FileCheck %s --check-prefix=OFFLOAD
// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=HIDDEN_STATE_WITH_OFFLOAD" | FileCheck %s --check-prefix=HIDDEN
// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=CUSTOM names-saved=query_proj names-offloaded=ffn_activation" | FileCheck %s --check-prefix=CUSTOM

// One layer, called twice: a projection (a dot_general without batch
// dimensions, "query_proj"), an activation ("ffn_activation"), a batched
// product, and the layer's output ("hidden_states").
func.func private @layer(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %q = sd.dot_general %x, %w batch = [] x [] contract = [2] x [0] {sd.name = "query_proj"} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %a = sd.tanh %q {sd.name = "ffn_activation"} : tensor<2x4x8xf32>
  %s = sd.dot_general %a, %a batch = [0] x [0] contract = [2] x [2] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %e = sd.exp %s : tensor<2x4x4xf32>
  %o = sd.dot_general %e, %x batch = [0] x [0] contract = [2] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %h = sd.add %o, %x {sd.name = "hidden_states"} : tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}
func.func @loss(%w0: tensor<8x8xf32> {sd.role = #sd.param<"w0", zeros>},
                %w1: tensor<8x8xf32> {sd.role = #sd.param<"w1", zeros>},
                %x: tensor<2x4x8xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %h0 = call @layer(%x, %w0) : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h1 = call @layer(%h0, %w1) : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = sd.mse_loss %h1, %x : tensor<2x4x8xf32>
  return %l : tensor<f32>
}

// The policies on the second layer's VJP groups (the first layer's are
// alike): exp's VJP (group 9) needs the exponential, the batched
// product's (group 8) and tanh's (group 7) the activation, the projection's
// (group 6) the layer's input. Forward ops are numbered 0-12, the second
// layer's 6-11.

// NONE keeps everything: each VJP reads the forward values themselves.
// NONE-LABEL: func.func @loss_grad
// NONE-NOT: sd.layer
// NONE: %[[H0:.*]] = sd.add {{.*}} {sd.name = "hidden_states", sd.vjp_group = 5 : i64}
// NONE: %[[A:.*]] = sd.tanh %{{.*}} {sd.name = "ffn_activation", sd.vjp_group = 7 : i64}
// NONE: %[[E:.*]] = sd.exp %{{.*}} {sd.vjp_group = 9 : i64}
// NONE: %[[DE:.*]] = sd.dot_general %{{.*}}, %[[H0]] {{.*}} {sd.backward, sd.vjp_group = 10 : i64}
// NONE-NOT: sd.recompute
// NONE: sd.mul %[[DE]], %[[E]] {sd.backward, sd.vjp_group = 9 : i64}
// NONE: sd.dot_general %{{.*}}, %[[A]] {{.*}} {sd.backward, sd.vjp_group = 8 : i64}
// NONE: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 7 : i64}
// NONE: sd.dot_general %{{.*}}, %[[H0]] {{.*}} {sd.backward, sd.vjp_group = 6 : i64}
// NONE-NOT: sd.recompute
// NONE-NOT: sd.offload
// NONE: return

// FULL recomputes the layer from its input (the first layer's output,
// kept) before the first VJP group that needs it: the projection, the
// activation, the batched product and the exponential.
// FULL-LABEL: func.func @loss_grad
// FULL-NOT: sd.offload
// FULL: %[[H0:.*]] = sd.add {{.*}} {sd.name = "hidden_states", sd.vjp_group = 5 : i64}
// FULL: %[[Q:.*]] = sd.dot_general %[[H0]], %{{.*}} {sd.backward, sd.name = "query_proj", sd.recompute, sd.vjp_group = 10 : i64}
// FULL-NEXT: %[[A:.*]] = sd.tanh %[[Q]] {sd.backward, sd.name = "ffn_activation", sd.recompute, sd.vjp_group = 10 : i64}
// FULL-NEXT: %[[S:.*]] = sd.dot_general %[[A]], %[[A]] {{.*}} {sd.backward, sd.recompute, sd.vjp_group = 10 : i64}
// FULL-NEXT: %[[E:.*]] = sd.exp %[[S]] {sd.backward, sd.recompute, sd.vjp_group = 10 : i64}
// FULL: sd.mul %{{.*}}, %[[E]] {sd.backward, sd.vjp_group = 9 : i64}
// FULL: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 7 : i64}
// FULL-NOT: sd.offload

// MATMUL_WITHOUT_BATCH keeps the projection (no batch dimensions) and
// recomputes the rest from it; the batched products are recomputed.
// MATMUL-LABEL: func.func @loss_grad
// MATMUL-NOT: sd.offload
// MATMUL: %[[Q:.*]] = sd.dot_general {{.*}} {sd.name = "query_proj", sd.vjp_group = 6 : i64}
// MATMUL: %[[A:.*]] = sd.tanh %[[Q]] {sd.backward, sd.name = "ffn_activation", sd.recompute, sd.vjp_group = 10 : i64}
// MATMUL-NEXT: %[[S:.*]] = sd.dot_general %[[A]], %[[A]] {{.*}} {sd.backward, sd.recompute, sd.vjp_group = 10 : i64}
// MATMUL-NEXT: %[[E:.*]] = sd.exp %[[S]] {sd.backward, sd.recompute, sd.vjp_group = 10 : i64}
// MATMUL: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 7 : i64}
// MATMUL-NOT: sd.name = "query_proj", sd.recompute
// MATMUL-NOT: sd.offload

// OFFLOAD_MATMUL_WITHOUT_BATCH moves the projection to host memory right
// after it is computed and back before the first group that needs it,
// then recomputes from the reloaded copy.
// OFFLOAD-LABEL: func.func @loss_grad
// OFFLOAD: %[[Q:.*]] = sd.dot_general {{.*}} {sd.name = "query_proj", sd.vjp_group = 6 : i64}
// OFFLOAD-NEXT: %[[HOST:.*]] = sd.offload %[[Q]]
// OFFLOAD: %[[R:.*]] = sd.reload %[[HOST]] {sd.backward, sd.vjp_group = 10 : i64}
// OFFLOAD-NEXT: %[[A:.*]] = sd.tanh %[[R]] {sd.backward, sd.name = "ffn_activation", sd.recompute, sd.vjp_group = 10 : i64}
// OFFLOAD: sd.mul %[[A]], %[[A]] {sd.backward, sd.vjp_group = 7 : i64}
// OFFLOAD-NOT: sd.name = "query_proj", sd.recompute

// HIDDEN_STATE_WITH_OFFLOAD offloads each layer's output; the rest is
// recomputed, the second layer from the reloaded first layer's output.
// HIDDEN-LABEL: func.func @loss_grad
// HIDDEN: %[[H0:.*]] = sd.add {{.*}} {sd.name = "hidden_states", sd.vjp_group = 5 : i64}
// HIDDEN-NEXT: %[[HOST0:.*]] = sd.offload %[[H0]]
// HIDDEN: %[[H1:.*]] = sd.add {{.*}} {sd.name = "hidden_states", sd.vjp_group = 11 : i64}
// HIDDEN-NEXT: %[[HOST1:.*]] = sd.offload %[[H1]]
// HIDDEN: sd.reload %[[HOST1]] {sd.backward, sd.vjp_group = 12 : i64}
// HIDDEN: %[[R0:.*]] = sd.reload %[[HOST0]] {sd.backward, sd.vjp_group = 10 : i64}
// HIDDEN-NEXT: %[[Q:.*]] = sd.dot_general %[[R0]], %{{.*}} {sd.backward, sd.name = "query_proj", sd.recompute, sd.vjp_group = 10 : i64}
// HIDDEN-NEXT: sd.tanh %[[Q]] {sd.backward, sd.name = "ffn_activation", sd.recompute, sd.vjp_group = 10 : i64}

// CUSTOM keeps query_proj, offloads ffn_activation and recomputes the rest
// from the reloaded activation.
// CUSTOM-LABEL: func.func @loss_grad
// CUSTOM: %[[A:.*]] = sd.tanh {{.*}} {sd.name = "ffn_activation", sd.vjp_group = 7 : i64}
// CUSTOM-NEXT: %[[HOST:.*]] = sd.offload %[[A]]
// CUSTOM: %[[R:.*]] = sd.reload %[[HOST]] {sd.backward, sd.vjp_group = 10 : i64}
// CUSTOM-NEXT: %[[S:.*]] = sd.dot_general %[[R]], %[[R]] {{.*}} {sd.backward, sd.recompute, sd.vjp_group = 10 : i64}
// CUSTOM-NEXT: sd.exp %[[S]] {sd.backward, sd.recompute, sd.vjp_group = 10 : i64}
// CUSTOM: sd.mul %[[R]], %[[R]] {sd.backward, sd.vjp_group = 7 : i64}
// CUSTOM-NOT: sd.name = "query_proj", sd.recompute
