// RUN: sdopt %s -sd-differentiate="mode=grad remat=NONE" | FileCheck %s --check-prefix=NONE
// RUN: sdopt %s -sd-differentiate="mode=grad remat=FULL" | FileCheck %s --check-prefix=FULL
// RUN: sdopt %s -sd-differentiate="mode=grad remat=MATMUL_WITHOUT_BATCH" | FileCheck %s --check-prefix=MATMUL
// RUN: sdopt %s -sd-differentiate="mode=grad remat=OFFLOAD_MATMUL_WITHOUT_BATCH" | FileCheck %s --check-prefix=OFFLOAD
// RUN: sdopt %s -sd-differentiate="mode=grad remat=HIDDEN_STATE_WITH_OFFLOAD" | FileCheck %s --check-prefix=HIDDEN
// RUN: sdopt %s -sd-differentiate="mode=grad remat=CUSTOM names-saved=query_proj names-offloaded=ffn_activation" | FileCheck %s --check-prefix=CUSTOM

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

// NONE keeps everything: nothing is recomputed or offloaded.
// NONE-LABEL: func.func @loss_grad
// NONE-NOT: sd.recompute
// NONE-NOT: sd.offload

// FULL recomputes each layer from its input in the backward pass: the
// projection, the activation, the batched product and the exponential.
// FULL-LABEL: func.func @loss_grad
// FULL-NOT: sd.offload
// FULL: sd.dot_general {{.*}} {sd.backward, sd.name = "query_proj", sd.recompute}
// FULL: sd.tanh {{.*}} {sd.backward, sd.name = "ffn_activation", sd.recompute}
// FULL: sd.exp {{.*}} {sd.backward, sd.recompute}

// MATMUL_WITHOUT_BATCH keeps the projection, recomputes the rest.
// MATMUL-LABEL: func.func @loss_grad
// MATMUL-NOT: sd.dot_general {{.*}}sd.name = "query_proj", sd.recompute
// MATMUL: sd.tanh {{.*}} {sd.backward, sd.name = "ffn_activation", sd.recompute}
// MATMUL-NOT: sd.offload

// OFFLOAD_MATMUL_WITHOUT_BATCH moves the projection to host memory right
// after it is computed and back in the backward pass.
// OFFLOAD-LABEL: func.func @loss_grad
// OFFLOAD: %[[Q:.*]] = sd.dot_general {{.*}}sd.name = "query_proj"
// OFFLOAD-NEXT: %[[H:.*]] = sd.offload %[[Q]]
// OFFLOAD: sd.reload %[[H]] {sd.backward}
// OFFLOAD-NOT: sd.dot_general {{.*}}sd.name = "query_proj", sd.recompute

// HIDDEN_STATE_WITH_OFFLOAD offloads each layer's output; the rest is
// recomputed.
// HIDDEN-LABEL: func.func @loss_grad
// HIDDEN: %[[H0:.*]] = sd.add {{.*}}sd.name = "hidden_states"
// HIDDEN-NEXT: sd.offload %[[H0]]
// HIDDEN: sd.reload
// HIDDEN: sd.recompute

// Custom: query_proj kept, ffn_activation offloaded, the rest recomputed.
// CUSTOM-LABEL: func.func @loss_grad
// CUSTOM: %[[A:.*]] = sd.tanh {{.*}}sd.name = "ffn_activation"
// CUSTOM-NEXT: sd.offload %[[A]]
// CUSTOM-NOT: sd.dot_general {{.*}}sd.name = "query_proj", sd.recompute
// CUSTOM: sd.reload
// CUSTOM: sd.exp {{.*}} {sd.backward, sd.recompute}
