// The DiT program: its block function, argument roles and logical axes,
// the names remat policies refer to, and its variants (static batch,
// bf16, epsilon loss). Captured SSA names, never hard-coded ones.

// RUN: sdgen --preset=dit-tiny 2>/dev/null | FileCheck %s
// No weight is ever sliced: fused projections are chunked after the
// projection (a sharded weight would be gathered once per slice).
// RUN: sdgen --preset=dit-tiny 2>/dev/null | not grep 'sd.slice %arg'

// One block: adaLN-Zero modulation from SiLU(c), attention on
// [B, H, S, Dh], GELU MLP; the named values in MaxDiffusion's vocabulary.
// CHECK-LABEL: func.func private @dit_block
// CHECK-SAME: (%[[X:.*]]: tensor<?x256x64xf32>, %[[C:[a-z0-9]+]]: tensor<?x64xf32>, %[[QKV_W:[a-z0-9]+]]: tensor<3x64x64xf32>
// CHECK-SAME: %[[MOD_W:[a-z0-9]+]]: tensor<6x64x64xf32>, %{{.*}}: tensor<6x64xf32>) -> tensor<?x256x64xf32>
// The six modulation vectors: one projection with the whole [D, 6, D]
// weight, chunks sliced from the result (the batch whole: limit -1).
// CHECK: %[[MOD:.*]] = sd.dot_general %[[C]], %[[MOD_W]] batch = [] x [] contract = [1] x [2] : (tensor<?x64xf32>, tensor<6x64x64xf32>) -> tensor<?x6x64xf32>
// CHECK: %[[MOD_B:.*]] = sd.add %[[MOD]], %{{.*}} : tensor<?x6x64xf32>
// CHECK: sd.slice %[[MOD_B]] start = [0, 0, 0] limit = [-1, 1, 64] strides = [1, 1, 1] : (tensor<?x6x64xf32>) -> tensor<?x1x64xf32>
// CHECK: sd.slice %[[MOD_B]] start = [0, 5, 0] limit = [-1, 6, 64]
// Likewise q, k and v from the [D, 3, D] qkv weight.
// CHECK: %[[QKV:.*]] = sd.dot_general %{{.*}}, %[[QKV_W]] batch = [] x [] contract = [2] x [2] : (tensor<?x256x64xf32>, tensor<3x64x64xf32>) -> tensor<?x256x3x64xf32>
// CHECK: %[[QKV_B:.*]] = sd.add %[[QKV]], %{{.*}} : tensor<?x256x3x64xf32>
// CHECK: %[[Q:.*]] = sd.slice %[[QKV_B]] start = [0, 0, 0, 0] limit = [-1, 256, 1, 64]
// CHECK: sd.reshape %[[Q]] {sd.name = "query_proj"} : (tensor<?x256x1x64xf32>) -> tensor<?x256x64xf32>
// CHECK: %[[K:.*]] = sd.slice %[[QKV_B]] start = [0, 0, 1, 0] limit = [-1, 256, 2, 64]
// CHECK: sd.reshape %[[K]] {sd.name = "key_proj"} : (tensor<?x256x1x64xf32>) -> tensor<?x256x64xf32>
// CHECK: sd.reshape {{.*}} {sd.name = "value_proj"} : (tensor<?x256x1x64xf32>) -> tensor<?x256x64xf32>
// CHECK: %[[Q:.*]] = sd.transpose {{.*}} {sd.name = "xq_out"} : (tensor<?x256x4x16xf32>) -> tensor<?x4x256x16xf32>
// CHECK: %[[K:.*]] = sd.transpose {{.*}} {sd.name = "xk_out"}
// The attention's operands carry MaxDiffusion's activation names, so the
// rules may shard the sequence (context parallelism).
// CHECK: %[[QC:.*]] = sd.sharding_constraint %[[Q]] logical = <[activation_batch, activation_heads, activation_length, activation_kv]>
// CHECK: %[[KC:.*]] = sd.sharding_constraint %[[K]] logical = <[activation_batch, activation_heads, activation_length, activation_kv]>
// CHECK: sd.attention %[[QC]], %[[KC]], %{{.*}} : {{.*}} -> tensor<?x4x256x16xf32>
// CHECK: sd.reshape {{.*}} {sd.name = "attn_output"} : (tensor<?x256x4x16xf32>) -> tensor<?x256x64xf32>
// CHECK: sd.gelu {{.*}} {sd.name = "ffn_activation"} : tensor<?x256x256xf32>
// CHECK: %[[OUT:.*]] = sd.add {{.*}} {sd.name = "hidden_states"} : tensor<?x256x64xf32>
// CHECK: return %[[OUT]]

// Parameters first (checkpoint names, initializers, logical axes), then
// the inputs; the batch is dynamic with a default.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<64x16xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[64, 4, 2, 2]>}
// CHECK-SAME: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"t_embedder.mlp.0.weight", normal(0.02)>}
// CHECK-SAME: tensor<1001x64xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}
// CHECK-SAME: tensor<3x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.attn.qkv.weight", xavier_uniform, stored[192, 64]>}
// CHECK-SAME: tensor<3x64xf32> {sd.logical_axes = #sd.logical_axes<[_, heads]>, sd.role = #sd.param<"blocks.0.attn.qkv.bias", zeros, stored[192]>}
// CHECK-SAME: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"blocks.0.attn.proj.weight", xavier_uniform>}
// CHECK-SAME: tensor<64x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"blocks.0.mlp.fc2.weight", xavier_uniform>}
// CHECK-SAME: tensor<6x64x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.weight", zeros, stored[384, 64]>}
// CHECK-SAME: tensor<6x64xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"blocks.1.adaLN_modulation.1.bias", zeros, stored[384]>}
// CHECK-SAME: tensor<32x64xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}
// CHECK-SAME: %[[X0:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// CHECK-SAME: %[[NOISE:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}
// CHECK-SAME: tensor<?x1001xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}
// CHECK-SAME: -> tensor<f32> attributes {sd.default_batch = 8 : i64, sd.prediction_type = #sd.prediction<flow>}
// Flow matching: x_t = x0 + t·(noise − x0), target noise − x0.
// CHECK: %[[TARGET:.*]] = sd.sub %[[NOISE]], %[[X0]] : tensor<?x32x32x4xf32>
// CHECK: sd.broadcast_in_dim %[[T]] dims = [0] : (tensor<?xf32>) -> tensor<?x32x32x4xf32>
// Sinusoidal embeddings from iota, no large constants.
// CHECK: sd.iota dim = 0 : tensor<128xf32>
// SiLU(c), computed once, conditions every block.
// CHECK: call @dit_block(%{{[a-z0-9]+}}, %[[SILU:[a-z0-9]+]],
// CHECK-NEXT: call @dit_block(%{{[a-z0-9]+}}, %[[SILU]],
// learn_sigma: DiT's output has 8 channels, of which the first 4 are the
// prediction.
// CHECK: %[[OUT:.*]] = sd.reshape {{.*}} -> tensor<?x32x32x8xf32>
// CHECK: %[[PRED:.*]] = sd.slice %[[OUT]] start = [0, 0, 0, 0] limit = [-1, 32, 32, 4] strides = [1, 1, 1, 1] : (tensor<?x32x32x8xf32>) -> tensor<?x32x32x4xf32>
// CHECK: sd.mse_loss %[[PRED]], %[[TARGET]] : tensor<?x32x32x4xf32>

// sdopt fixes the batch: every type becomes static.
// RUN: sdgen --preset=dit-tiny 2>/dev/null | sdopt --batch=2 | FileCheck %s --check-prefix=BATCH2
// RUN: sdgen --preset=dit-tiny 2>/dev/null | sdopt --batch=2 | not grep 'tensor<?'
// BATCH2-LABEL: func.func private @dit_block
// BATCH2-SAME: tensor<2x256x64xf32>, %{{.*}}: tensor<2x64xf32>
// BATCH2: sd.attention {{.*}} -> tensor<2x4x256x16xf32>
// BATCH2-LABEL: func.func @loss
// BATCH2-SAME: tensor<2x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// BATCH2: call @dit_block({{.*}}) : (tensor<2x256x64xf32>, tensor<2x64xf32>
// BATCH2: sd.mse_loss %{{.*}}, %{{.*}} : tensor<2x32x32x4xf32>

// --static-batch writes the batch into the types, and biases are plain
// broadcasts (no batch-shaped vector of ones).
// RUN: sdgen --preset=dit-tiny --static-batch --batch=4 2>/dev/null | FileCheck %s --check-prefix=STATIC
// RUN: sdgen --preset=dit-tiny --static-batch --batch=4 2>/dev/null | not grep 'tensor<?'
// STATIC-LABEL: func.func private @dit_block
// STATIC-NOT: sd.exp
// STATIC: sd.broadcast_in_dim %{{.*}} dims = [2] : (tensor<64xf32>) -> tensor<4x256x64xf32>
// STATIC-LABEL: func.func @loss
// STATIC-SAME: tensor<4x32x32x4xf32>
// STATIC-SAME: attributes {sd.default_batch = 4 : i64, sd.prediction_type = #sd.prediction<flow>}

// bf16 parameters and activations; the timestep stays f32, the loss is f32.
// RUN: sdgen --preset=dit-tiny --dtype=bf16 2>/dev/null | FileCheck %s --check-prefix=BF16
// BF16-LABEL: func.func private @dit_block
// BF16-SAME: tensor<?x256x64xbf16>, %{{.*}}: tensor<?x64xbf16>, %{{.*}}: tensor<3x64x64xbf16>
// BF16-LABEL: func.func @loss
// BF16-SAME: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}
// BF16: sd.convert %{{.*}} : tensor<?xf32> -> tensor<?xbf16>
// BF16: sd.convert %{{.*}} : tensor<?x256xf32> -> tensor<?x256xbf16>
// BF16: sd.mse_loss %{{.*}}, %{{.*}} : tensor<?x32x32x4xbf16>
// BF16: return %{{.*}} : tensor<f32>

// Epsilon prediction: x_t = cos(πt/2)·x0 + sin(πt/2)·noise, target noise.
// RUN: sdgen --preset=dit-tiny --prediction-type=epsilon 2>/dev/null | FileCheck %s --check-prefix=EPS
// EPS-LABEL: func.func @loss
// EPS-SAME: %[[NOISE:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}
// EPS: sd.constant dense<1.57079637> : tensor<f32>
// EPS: sd.cos
// EPS: sd.sin
// EPS: sd.mse_loss %{{.*}}, %[[NOISE]] : tensor<?x32x32x4xf32>

// Overrides change the architecture.
// RUN: sdgen --preset=dit-tiny --depth=3 --hidden=96 --heads=3 --mlp-ratio=2 --latent-size=8 2>&1 >/dev/null | FileCheck %s --check-prefix=OVERRIDE
// RUN: sdgen --preset=dit-tiny --depth=3 --hidden=96 --heads=3 --mlp-ratio=2 --latent-size=8 2>/dev/null | FileCheck %s --check-prefix=OVERRIDE-IR
// OVERRIDE: sdgen: dit-tiny: {{.*}} parameters (41 tensors)
// OVERRIDE-IR-LABEL: func.func private @dit_block
// OVERRIDE-IR-SAME: tensor<?x16x96xf32>
// OVERRIDE-IR: sd.attention {{.*}} -> tensor<?x3x16x32xf32>
// OVERRIDE-IR: sd.gelu {{.*}} : tensor<?x16x192xf32>
// OVERRIDE-IR-LABEL: func.func @loss
// OVERRIDE-IR-COUNT-3: call @dit_block
