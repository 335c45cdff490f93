// Wan2.1 at a small size: the block's self-attention (RMS-normed q/k, 3-D
// RoPE), cross-attention to the text and FFN, with the names remat
// policies use; the program specializes to a static batch.
// RUN: sdgen --preset=wan2.1-14b --depth=2 --hidden=256 --heads=2 --frames=5 --height=64 --width=64 --text-length=8 2>%t.log | FileCheck %s
// RUN: FileCheck %s --check-prefix=SUM < %t.log
// RUN: sdgen --preset=wan2.1-14b --depth=2 --hidden=256 --heads=2 --frames=5 --height=64 --width=64 --text-length=8 2>/dev/null | sdopt --batch=2 | FileCheck %s --check-prefix=BATCH2
// RUN: sdgen --preset=wan2.1-14b --depth=2 --hidden=256 --heads=2 --frames=5 --height=64 --width=64 --text-length=8 2>/dev/null | sdopt --batch=2 | not grep 'tensor<?'
// No weight is sliced: the modulation tables are added whole.
// RUN: sdgen --preset=wan2.1-14b --depth=2 --hidden=256 --heads=2 --frames=5 --height=64 --width=64 --text-length=8 2>/dev/null | not grep 'sd.slice %arg'

// 5 frames of 64×64 → latents 2×8×8 → 2×4×4 = 32 tokens of 1·2·2·16 = 64.
// SUM: sdgen: wan2.1-14b: 3.44M parameters (69 tensors)

// CHECK-LABEL: func.func private @wan_block
// CHECK-SAME: (%[[X:.*]]: tensor<?x32x256xf32>, %[[CTX:.*]]: tensor<?x8x256xf32>, %[[E:.*]]: tensor<?x6x256xf32>, %[[ROPE:.*]]: tensor<32x64x2x2xf32>,
// CHECK-SAME: %[[MOD:[a-z0-9]+]]: tensor<1x6x256xf32>) -> tensor<?x32x256xf32>
// The block's modulation table offsets the six time-projection vectors
// [B, 6, D]; the chunks are slices of the sum.
// CHECK: %[[TABLE:.*]] = sd.reshape %[[MOD]] : (tensor<1x6x256xf32>) -> tensor<6x256xf32>
// CHECK: %[[OFFSET:.*]] = sd.broadcast_in_dim %[[TABLE]] dims = [1, 2] : (tensor<6x256xf32>) -> tensor<?x6x256xf32>
// CHECK: %[[SIX:.*]] = sd.add %[[E]], %[[OFFSET]] : tensor<?x6x256xf32>
// CHECK: sd.slice %[[SIX]] start = [0, 0, 0] limit = [-1, 1, 256] strides = [1, 1, 1] : (tensor<?x6x256xf32>) -> tensor<?x1x256xf32>
// Self-attention.
// CHECK: %[[Q:.*]] = sd.add {{.*}} {sd.name = "query_proj"} : tensor<?x32x256xf32>
// CHECK: sd.add {{.*}} {sd.name = "key_proj"} : tensor<?x32x256xf32>
// CHECK: sd.add {{.*}} {sd.name = "value_proj"} : tensor<?x32x256xf32>
// CHECK: sd.rms_norm %[[Q]] scale %{{.*}} : (tensor<?x32x256xf32>, tensor<256xf32>)
// CHECK: sd.dot_general %{{.*}}, %[[ROPE]] batch = [1, 3] x [0, 1] contract = [4] x [2] : (tensor<?x32x2x64x2xf32>, tensor<32x64x2x2xf32>) -> tensor<32x64x?x2x2xf32>
// CHECK: sd.transpose {{.*}} {sd.name = "xq_out"} : (tensor<?x32x2x128xf32>) -> tensor<?x2x32x128xf32>
// CHECK: sd.transpose {{.*}} {sd.name = "xk_out"}
// CHECK: sd.attention {{.*}} : (tensor<?x2x32x128xf32>, tensor<?x2x32x128xf32>, tensor<?x2x32x128xf32>) -> tensor<?x2x32x128xf32>
// CHECK: sd.reshape {{.*}} {sd.name = "attn_output"}
// CHECK: sd.add {{.*}} {sd.name = "self_attn"} : tensor<?x32x256xf32>
// Cross-attention: keys and values from the text, no RoPE.
// CHECK: sd.layer_norm %{{.*}} scale %{{.*}} bias %{{.*}} : (tensor<?x32x256xf32>, tensor<256xf32>, tensor<256xf32>)
// CHECK: sd.add {{.*}} {sd.name = "query_proj"} : tensor<?x32x256xf32>
// CHECK: sd.dot_general %[[CTX]], %{{.*}} batch = [] x [] contract = [2] x [1]
// CHECK: sd.add {{.*}} {sd.name = "key_proj"} : tensor<?x8x256xf32>
// CHECK: sd.add {{.*}} {sd.name = "value_proj"} : tensor<?x8x256xf32>
// CHECK-NOT: batch = [1, 3]
// CHECK: sd.attention {{.*}} : (tensor<?x2x32x128xf32>, tensor<?x2x8x128xf32>, tensor<?x2x8x128xf32>) -> tensor<?x2x32x128xf32>
// CHECK: sd.add {{.*}} {sd.name = "cross_attn"} : tensor<?x32x256xf32>
// FFN: 256 × 2.7 = 691 wide.
// CHECK: sd.gelu {{.*}} {sd.name = "ffn_activation"} : tensor<?x32x691xf32>
// CHECK: %[[OUT:.*]] = sd.add {{.*}} {sd.name = "hidden_states"} : tensor<?x32x256xf32>
// CHECK: return %[[OUT]]

// CHECK-LABEL: func.func @loss
// CHECK-SAME: sd.role = #sd.param<"patch_embedding.weight", xavier_uniform, stored[256, 16, 1, 2, 2]>
// CHECK-SAME: tensor<6x256x256xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"condition_embedder.time_proj.weight", xavier_uniform, stored[1536, 256]>}
// CHECK-SAME: tensor<256x256xf32> {sd.logical_axes = #sd.logical_axes<[heads, embed]>, sd.role = #sd.param<"blocks.0.attn1.to_q.weight", xavier_uniform>}
// CHECK-SAME: tensor<256xf32> {sd.logical_axes = #sd.logical_axes<[norm]>, sd.role = #sd.param<"blocks.0.attn1.norm_q.weight", ones>}
// CHECK-SAME: tensor<1x6x256xf32> {sd.logical_axes = #sd.logical_axes<[_, _, embed]>, sd.role = #sd.param<"blocks.1.scale_shift_table", normal(0.0625)>}
// CHECK-SAME: sd.role = #sd.param<"proj_out.weight", zeros>
// CHECK-SAME: tensor<?x2x8x8x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _, _]>, sd.role = #sd.input<latents>}
// CHECK-SAME: tensor<?x8x4096xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<context>}
// CHECK-SAME: attributes {sd.default_batch = 1 : i64, sd.prediction_type = #sd.prediction<flow>}
// The six modulation vectors: one projection with the whole [D, 6, D]
// weight, passed whole to the blocks.
// CHECK: %[[SIX_E:.*]] = sd.add %{{.*}} : tensor<?x6x256xf32>
// The RoPE table is computed once from iota: 22 frame, 21 row, 21 column pairs.
// CHECK: sd.iota dim = 0 : tensor<2x4x4x22xf32>
// CHECK: sd.iota dim = 1 : tensor<2x4x4x21xf32>
// CHECK: sd.iota dim = 2 : tensor<2x4x4x21xf32>
// CHECK-COUNT-2: call @wan_block(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %[[SIX_E]],
// The head's [1, 2, D] table is added to e broadcast to [B, 2, D].
// CHECK: sd.broadcast_in_dim %{{.*}} dims = [0, 2] : (tensor<?x256xf32>) -> tensor<?x2x256xf32>
// CHECK: sd.slice %{{.*}} start = [0, 1, 0] limit = [-1, 2, 256]
// CHECK: sd.mse_loss %{{.*}}, %{{.*}} : tensor<?x2x8x8x16xf32>

// BATCH2-LABEL: func.func private @wan_block
// BATCH2-SAME: tensor<2x32x256xf32>
// BATCH2: sd.attention {{.*}} -> tensor<2x2x32x128xf32>
// BATCH2-LABEL: func.func @loss
// BATCH2: sd.mse_loss %{{.*}}, %{{.*}} : tensor<2x2x8x8x16xf32>
