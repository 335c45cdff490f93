// Flux at a small size: double-stream blocks (two streams, joint attention
// as one attention per stream over the shared keys), single-stream blocks
// (parallel attention and MLP), RoPE, and the image-token loss.
// RUN: sdgen --preset=flux-dev --depth=1 --hidden=256 --heads=2 --height=64 --width=64 --text-length=8 2>%t.log | FileCheck %s
// RUN: FileCheck %s --check-prefix=SUM < %t.log
// RUN: sdgen --preset=flux-dev --depth=1 --hidden=256 --heads=2 --height=64 --width=64 --text-length=8 2>/dev/null | sdopt --batch=2 | FileCheck %s --check-prefix=BATCH2
// RUN: sdgen --preset=flux-dev --depth=1 --hidden=256 --heads=2 --height=64 --width=64 --text-length=8 2>/dev/null | sdopt --batch=2 | not grep 'tensor<?'
// The only weights sliced are the single blocks' proj_out, along their
// input width (the axis FSDP does not shard), and no activation is
// concatenated for it.
// RUN: sdgen --preset=flux-dev --depth=1 --hidden=256 --heads=2 --height=64 --width=64 --text-length=8 2>/dev/null | grep 'sd.slice %arg' | count 2

// 64×64 pixels → 8×8×16 latents → 16 image tokens of 64; 8 text tokens.
// SUM: sdgen: flux-dev: 6.08M parameters (80 tensors)

// CHECK-LABEL: func.func private @flux_double_block
// CHECK-SAME: (%{{.*}}: tensor<?x16x256xf32>, %{{.*}}: tensor<?x8x256xf32>, %{{.*}}: tensor<?x256xf32>, %[[IMG_ROPE:.*]]: tensor<16x64x2x2xf32>, %[[TXT_ROPE:[a-z0-9]+]]: tensor<8x64x2x2xf32>
// CHECK-SAME: -> (tensor<?x16x256xf32>, tensor<?x8x256xf32>)
// Each stream's modulation is one projection with the whole [6, D, D]
// weight; its q, k and v projections carry the stream's name, which
// FLUX_OPTIMIZED recomputes.
// CHECK: sd.dot_general {{.*}} -> tensor<?x6x256xf32>
// CHECK-COUNT-3: {sd.name = "img_qkv_proj"} : tensor<?x16x256xf32>
// CHECK: sd.rms_norm %{{.*}} scale %{{.*}} : (tensor<?x16x2x128xf32>, tensor<128xf32>)
// CHECK: sd.dot_general %{{.*}}, %[[IMG_ROPE]] batch = [1, 3] x [0, 1] contract = [4] x [2]
// CHECK: %[[IMG_Q:.*]] = sd.transpose {{.*}} {sd.name = "xq_out"} : (tensor<?x16x2x128xf32>) -> tensor<?x2x16x128xf32>
// CHECK: %[[IMG_K:.*]] = sd.transpose {{.*}} {sd.name = "xk_out"}
// CHECK-COUNT-3: {sd.name = "txt_qkv_proj"} : tensor<?x8x256xf32>
// CHECK: sd.dot_general %{{.*}}, %[[TXT_ROPE]] batch = [1, 3] x [0, 1] contract = [4] x [2]
// CHECK: %[[TXT_Q:.*]] = sd.transpose {{.*}} {sd.name = "xq_out"} : (tensor<?x8x2x128xf32>) -> tensor<?x2x8x128xf32>
// CHECK: %[[TXT_K:.*]] = sd.transpose {{.*}} {sd.name = "xk_out"}
// The joint sequence is [txt; img].
// CHECK: %[[KEYS:.*]] = sd.concat %[[TXT_K]], %[[IMG_K]] dim = 2 : {{.*}} -> tensor<?x2x24x128xf32>
// CHECK: %[[VALUES:.*]] = sd.concat
// A stream's queries over the joint keys: the keys' length is the
// cross-attention name.
// CHECK: %[[QC:.*]] = sd.sharding_constraint %[[IMG_Q]] logical = <[activation_batch, activation_heads, activation_length, activation_kv]>
// CHECK: %[[KC:.*]] = sd.sharding_constraint %[[KEYS]] logical = <[activation_batch, activation_heads, activation_kv_length, activation_kv]>
// CHECK: %[[VC:.*]] = sd.sharding_constraint %[[VALUES]] logical = <[activation_batch, activation_heads, activation_kv_length, activation_kv]>
// CHECK: sd.attention %[[QC]], %[[KC]], %[[VC]] : {{.*}} -> tensor<?x2x16x128xf32>
// CHECK: sd.reshape {{.*}} {sd.name = "attn_output"} : (tensor<?x16x2x128xf32>) -> tensor<?x16x256xf32>
// CHECK: sd.gelu {{.*}} {sd.name = "ffn_activation"} : tensor<?x16x1024xf32>
// CHECK: %[[IMG:.*]] = sd.add {{.*}} {sd.name = "hidden_states"} : tensor<?x16x256xf32>
// CHECK: %[[TXT_QC:.*]] = sd.sharding_constraint %[[TXT_Q]] logical = <[activation_batch, activation_heads, activation_length, activation_kv]>
// CHECK: sd.attention %[[TXT_QC]], {{.*}} : {{.*}} -> tensor<?x2x8x128xf32>
// CHECK: %[[TXT:.*]] = sd.add {{.*}} {sd.name = "hidden_states"} : tensor<?x8x256xf32>
// CHECK: return %[[IMG]], %[[TXT]]

// The single block's proj_out [D, D + mlp] multiplies [attention; MLP]:
// its two column blocks are sliced and multiply each half, the products
// summed (one bias); no activation is concatenated.
// CHECK-LABEL: func.func private @flux_single_block
// CHECK-SAME: (%[[X:.*]]: tensor<?x24x256xf32>, %{{.*}}: tensor<?x256xf32>, %{{.*}}: tensor<24x64x2x2xf32>, %{{.*}}: tensor<3x256x256xf32>, %{{.*}}: tensor<3x256xf32>,
// CHECK-SAME: %[[WMLP:[a-z0-9]+]]: tensor<1024x256xf32>, %{{.*}}: tensor<1024xf32>, %[[WOUT:[a-z0-9]+]]: tensor<256x1280xf32>, %[[BOUT:[a-z0-9]+]]: tensor<256xf32>
// CHECK: %[[H:.*]] = sd.add {{.*}} {sd.name = "lin1_norm_hidden_states"} : tensor<?x24x256xf32>
// CHECK: sd.add {{.*}} {sd.name = "query_proj"} : tensor<?x24x256xf32>
// CHECK: sd.add {{.*}} {sd.name = "key_proj"}
// CHECK: sd.add {{.*}} {sd.name = "value_proj"}
// CHECK: sd.transpose {{.*}} {sd.name = "xq_out"}
// CHECK: sd.transpose {{.*}} {sd.name = "xk_out"}
// CHECK: sd.dot_general %[[H]], %[[WMLP]] {{.*}} -> tensor<?x24x1024xf32>
// CHECK: %[[ATTN:.*]] = sd.reshape {{.*}} {sd.name = "attn_output"} : (tensor<?x24x2x128xf32>) -> tensor<?x24x256xf32>
// CHECK: %[[ACT:.*]] = sd.gelu {{.*}} {sd.name = "ffn_activation"} : tensor<?x24x1024xf32>
// CHECK: %[[W_ATTN:.*]] = sd.slice %[[WOUT]] start = [0, 0] limit = [256, 256] strides = [1, 1] : (tensor<256x1280xf32>) -> tensor<256x256xf32>
// CHECK: %[[OUT_ATTN:.*]] = sd.dot_general %[[ATTN]], %[[W_ATTN]]
// CHECK: %[[W_MLP:.*]] = sd.slice %[[WOUT]] start = [0, 256] limit = [256, 1280] strides = [1, 1] : (tensor<256x1280xf32>) -> tensor<256x1024xf32>
// CHECK: %[[OUT_MLP:.*]] = sd.dot_general %[[ACT]], %[[W_MLP]]
// CHECK: %[[PROJ:.*]] = sd.add %[[OUT_ATTN]], %[[OUT_MLP]] : tensor<?x24x256xf32>
// CHECK: %[[BIAS:.*]] = sd.broadcast_in_dim %[[BOUT]] dims = [2]
// CHECK: sd.add %[[PROJ]], %[[BIAS]] : tensor<?x24x256xf32>
// CHECK: sd.add %[[X]], %{{.*}} {sd.name = "hidden_states"} : tensor<?x24x256xf32>

// diffusers' FluxTransformer2DModel names, in its order.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: sd.role = #sd.param<"time_text_embed.timestep_embedder.linear_1.weight", xavier_uniform>
// CHECK-SAME: sd.role = #sd.param<"time_text_embed.guidance_embedder.linear_1.weight", xavier_uniform>
// CHECK-SAME: tensor<256x768xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"time_text_embed.text_embedder.linear_1.weight", xavier_uniform>}
// CHECK-SAME: tensor<256x4096xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"context_embedder.weight", xavier_uniform>}
// CHECK-SAME: tensor<256x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.weight", xavier_uniform>}
// CHECK-SAME: tensor<6x256x256xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"transformer_blocks.0.norm1.linear.weight", xavier_uniform, stored[1536, 256]>}
// CHECK-SAME: tensor<256x256xf32> {sd.logical_axes = #sd.logical_axes<[heads, embed]>, sd.role = #sd.param<"transformer_blocks.0.attn.to_q.weight", xavier_uniform>}
// CHECK-SAME: tensor<128xf32> {sd.logical_axes = #sd.logical_axes<[norm]>, sd.role = #sd.param<"transformer_blocks.0.attn.norm_added_k.weight", ones>}
// CHECK-SAME: tensor<256x256xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"transformer_blocks.0.attn.to_add_out.weight", xavier_uniform>}
// CHECK-SAME: tensor<1024x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"transformer_blocks.0.ff_context.net.0.proj.weight", xavier_uniform>}
// CHECK-SAME: tensor<3x256x256xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"single_transformer_blocks.1.norm.linear.weight", xavier_uniform, stored[768, 256]>}
// CHECK-SAME: tensor<1024x256xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"single_transformer_blocks.1.proj_mlp.weight", xavier_uniform>}
// CHECK-SAME: tensor<256x1280xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"single_transformer_blocks.1.proj_out.weight", xavier_uniform>}
// CHECK-SAME: tensor<256x256xf32> {sd.logical_axes = #sd.logical_axes<[heads, embed]>, sd.role = #sd.param<"single_transformer_blocks.1.attn.to_v.weight", xavier_uniform>}
// CHECK-SAME: sd.role = #sd.param<"norm_out.linear.weight", xavier_uniform, stored[512, 256]>
// CHECK-SAME: sd.role = #sd.param<"proj_out.weight", xavier_uniform>
// CHECK-SAME: tensor<?x8x8x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// CHECK-SAME: tensor<?x8x4096xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<context>}
// CHECK-SAME: tensor<?x768xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<pooled>}
// CHECK-SAME: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<guidance>}
// CHECK-SAME: attributes {sd.default_batch = 1 : i64, sd.guidance = 3.500000e+00 : f64, sd.prediction_type = #sd.prediction<flow>}
// Image RoPE ids (0, row, column): 8, 28 and 28 pairs.
// CHECK: sd.iota dim = 0 : tensor<1x4x4x8xf32>
// CHECK: sd.iota dim = 1 : tensor<1x4x4x28xf32>
// CHECK: sd.iota dim = 2 : tensor<1x4x4x28xf32>
// CHECK: %[[BOTH:.*]]:2 = call @flux_double_block
// CHECK: sd.concat %[[BOTH]]#1, %[[BOTH]]#0 dim = 1 : (tensor<?x8x256xf32>, tensor<?x16x256xf32>) -> tensor<?x24x256xf32>
// CHECK-COUNT-2: call @flux_single_block
// The loss covers the image tokens: text positions are masked, the mean
// rescaled by 24 / 16.
// CHECK: %[[LOSS:.*]] = sd.mse_loss %{{.*}}, %{{.*}} : tensor<?x24x64xf32>
// CHECK: %[[SCALE:.*]] = sd.constant dense<1.500000e+00> : tensor<f32>
// CHECK: sd.mul %[[LOSS]], %[[SCALE]] : tensor<f32>

// BATCH2-LABEL: func.func private @flux_double_block
// BATCH2-SAME: tensor<2x16x256xf32>, %{{.*}}: tensor<2x8x256xf32>
// BATCH2-LABEL: func.func @loss
// BATCH2: sd.mse_loss %{{.*}}, %{{.*}} : tensor<2x24x64xf32>
