// RUN: sdopt %s -verify-diagnostics -sd-differentiate -sd-remat="remat=FLUX_OPTIMIZED" | FileCheck %s

// FLUX_OPTIMIZED: in double-stream layers everything is kept but
// img_qkv_proj / txt_qkv_proj; in single-stream layers only attn_output and
// lin1_norm_hidden_states are kept; outside layers, as MATMUL_WITHOUT_BATCH.
func.func private @flux_double_block(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %q = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.name = "img_qkv_proj"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = sd.tanh %q {sd.name = "double_act"} : tensor<4x8xf32>
  %h = sd.mul %a, %a : tensor<4x8xf32>
  return %h : tensor<4x8xf32>
}
func.func private @flux_single_block(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %q = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.name = "attn_output"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = sd.tanh %q {sd.name = "single_act"} : tensor<4x8xf32>
  %h = sd.mul %a, %a : tensor<4x8xf32>
  return %h : tensor<4x8xf32>
}
func.func @loss(%w0: tensor<8x8xf32> {sd.role = #sd.param<"w0", zeros>},
                %w1: tensor<8x8xf32> {sd.role = #sd.param<"w1", zeros>},
                %x: tensor<4x8xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %h0 = call @flux_double_block(%x, %w0) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = call @flux_single_block(%h0, %w1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = sd.mse_loss %h1, %x : tensor<4x8xf32>
  return %l : tensor<f32>
}

// The single block's tanh is recomputed from its kept projection
// (attn_output) for the mul's VJP; the double block's tanh is kept (its
// projection img_qkv_proj is not, but the tanh VJP uses its own result).
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[DA:.*]] = sd.tanh %{{.*}} {sd.name = "double_act", sd.vjp_group = 1 : i64}
// CHECK: %[[P:.*]] = sd.dot_general {{.*}} {sd.name = "attn_output", sd.vjp_group = 3 : i64}
// CHECK: %[[SA:.*]] = sd.tanh %[[P]] {sd.backward, sd.name = "single_act", sd.recompute, sd.vjp_group = 5 : i64}
// CHECK-NEXT: sd.mul %{{.*}}, %[[SA]] {sd.backward, sd.vjp_group = 5 : i64}
// CHECK: sd.mul %[[SA]], %[[SA]] {sd.backward, sd.vjp_group = 4 : i64}
// CHECK: sd.mul %[[DA]], %[[DA]] {sd.backward, sd.vjp_group = 1 : i64}
// CHECK-NOT: sd.recompute
// CHECK: return
