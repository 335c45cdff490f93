// The long-sequence preset: Wan2.1's blocks at 2 layers, 128 wide, 4 heads
// of 32, over 61 frames of 256×256 → latents 16×32×32 → 16×16×16 = 4,096
// tokens of 1·2·2·16 = 64, with cross-attention to 16 text tokens. Untiled,
// each self-attention holds a [B, 4, 4096, 4096] score matrix (256 MiB a
// sample in f32); --attention=flash tiles both attentions.
// RUN: sdgen --preset=wan-long 2>%t.log | FileCheck %s
// RUN: FileCheck %s --check-prefix=SUM < %t.log
// RUN: sdgen --preset=wan-long 2>/dev/null | sdopt --batch=1 --attention=flash | FileCheck %s --check-prefix=FLASH --implicit-check-not=4096x4096
// Overrides apply as to wan2.1-14b: 121 frames → 31 latent frames, 7,936 tokens.
// RUN: sdgen --preset=wan-long --frames=121 --text-length=8 2>/dev/null | FileCheck %s --check-prefix=FRAMES

// SUM: sdgen: wan-long: 1.15M parameters (69 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined)

// CHECK-LABEL: func.func private @wan_block
// CHECK-SAME: (%[[X:.*]]: tensor<?x4096x128xf32>, %[[CTX:.*]]: tensor<?x16x128xf32>, %{{.*}}: tensor<?x6x128xf32>, %[[ROPE:.*]]: tensor<4096x16x2x2xf32>,
// Self-attention over the 4,096 tokens, with 3-D RoPE.
// CHECK: sd.add {{.*}} {sd.name = "query_proj"} : tensor<?x4096x128xf32>
// CHECK: sd.add {{.*}} {sd.name = "key_proj"} : tensor<?x4096x128xf32>
// CHECK: sd.add {{.*}} {sd.name = "value_proj"} : tensor<?x4096x128xf32>
// CHECK: sd.dot_general %{{.*}}, %[[ROPE]] batch = [1, 3] x [0, 1] contract = [4] x [2]
// CHECK: sd.transpose {{.*}} {sd.name = "xq_out"} : (tensor<?x4096x4x32xf32>) -> tensor<?x4x4096x32xf32>
// CHECK: sd.transpose {{.*}} {sd.name = "xk_out"} : (tensor<?x4096x4x32xf32>) -> tensor<?x4x4096x32xf32>
// CHECK: sd.attention {{.*}} : (tensor<?x4x4096x32xf32>, tensor<?x4x4096x32xf32>, tensor<?x4x4096x32xf32>) -> tensor<?x4x4096x32xf32>
// CHECK: sd.reshape {{.*}} {sd.name = "attn_output"} : (tensor<?x4096x4x32xf32>) -> tensor<?x4096x128xf32>
// CHECK: sd.add {{.*}} {sd.name = "self_attn"} : tensor<?x4096x128xf32>
// Cross-attention: 4,096 queries against the 16 text tokens.
// CHECK: sd.dot_general %[[CTX]], %{{.*}} batch = [] x [] contract = [2] x [1]
// CHECK: sd.add {{.*}} {sd.name = "key_proj"} : tensor<?x16x128xf32>
// CHECK: sd.attention {{.*}} : (tensor<?x4x4096x32xf32>, tensor<?x4x16x32xf32>, tensor<?x4x16x32xf32>) -> tensor<?x4x4096x32xf32>
// CHECK: sd.add {{.*}} {sd.name = "cross_attn"} : tensor<?x4096x128xf32>
// FFN: 128 × 2.7 = 346 wide.
// CHECK: sd.gelu {{.*}} {sd.name = "ffn_activation"} : tensor<?x4096x346xf32>
// CHECK: sd.add {{.*}} {sd.name = "hidden_states"} : tensor<?x4096x128xf32>

// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<128x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"patch_embedding.weight", xavier_uniform, stored[128, 16, 1, 2, 2]>}
// CHECK-SAME: tensor<?x16x32x32x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _, _]>, sd.role = #sd.input<latents>}
// CHECK-SAME: tensor<?x16x4096xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<context>}
// CHECK-SAME: attributes {sd.default_batch = 1 : i64, sd.prediction_type = #sd.prediction<flow>}
// Patches (1, 2, 2), channel-major: [B, 4096, 64].
// CHECK: sd.reshape {{.*}} -> tensor<?x4096x64xf32>
// RoPE over the 16 pairs of a head: 6 frame, 5 row and 5 column pairs.
// CHECK: sd.iota dim = 0 : tensor<16x16x16x6xf32>
// CHECK: sd.iota dim = 1 : tensor<16x16x16x5xf32>
// CHECK: sd.iota dim = 2 : tensor<16x16x16x5xf32>
// CHECK-COUNT-2: call @wan_block
// CHECK-NOT: call @wan_block
// CHECK: sd.mse_loss %{{.*}}, %{{.*}} : tensor<?x16x32x32x16xf32>

// Tiled, both attentions keep only their output and per-row log-sum-exp
// [B, 4, 4096]; no [4096, 4096] tensor is left.
// FLASH-LABEL: func.func private @wan_block
// FLASH: sd.flash_attention {{.*}} : (tensor<1x4x4096x32xf32>, tensor<1x4x4096x32xf32>, tensor<1x4x4096x32xf32>) -> (tensor<1x4x4096x32xf32>, tensor<1x4x4096xf32>)
// FLASH: sd.flash_attention {{.*}} : (tensor<1x4x4096x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>) -> (tensor<1x4x4096x32xf32>, tensor<1x4x4096xf32>)
// FLASH-LABEL: func.func @loss

// FRAMES-LABEL: func.func private @wan_block
// FRAMES-SAME: tensor<?x7936x128xf32>, %{{.*}}: tensor<?x8x128xf32>
// FRAMES: sd.attention {{.*}} -> tensor<?x4x7936x32xf32>
