// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="cache-bytes=1048576" | FileCheck %s
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="block-q=64 block-kv-compute=32 block-kv=128 block-kv-dq=96 use-fused-bwd-kernel=true" | FileCheck %s --check-prefix=GIVEN
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="attention=ring cache-bytes=1048576" | FileCheck %s --check-prefix=RING
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="attention=ulysses_ring ulysses-shards=2 cache-bytes=1048576" | FileCheck %s --check-prefix=HYBRID

// Block sizes derived from a 1 MiB cache at head_dim 64: the largest
// power-of-two square tile whose query block, accumulator, scores and K/V
// tile fit in 512 KiB is 256; 512 KiB holds 4 such K/V tiles (1,024 keys).
// Backward sizes follow the forward ones; the keys fit one dK/dV block, so
// the fused dQ is chosen. The name, the scale (the default 1/sqrt(64)) and
// the uses carry over.
// CHECK-LABEL: func.func @derived
// CHECK-SAME: (%[[Q:.*]]: tensor<8x6x256x64xf32>, %[[K:.*]]: tensor<8x6x256x64xf32>, %[[V:.*]]: tensor<8x6x256x64xf32>)
// CHECK: %[[O:.*]], %{{.*}} = sd.flash_attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01 blocks = <block_q = 256, block_kv_compute = 256, block_kv = 1024, block_q_dkv = 256, block_kv_dkv = 1024, block_kv_dkv_compute = 256, block_q_dq = 256, block_kv_dq = 1024, use_fused_bwd_kernel = true> {sd.name = "attn_output"}
// CHECK-NOT: sd.attention
// CHECK: return %[[O]]
// GIVEN-LABEL: func.func @derived
// GIVEN: sd.flash_attention {{.*}} blocks = <block_q = 64, block_kv_compute = 32, block_kv = 128, block_q_dkv = 64, block_kv_dkv = 128, block_kv_dkv_compute = 32, block_q_dq = 64, block_kv_dq = 96, use_fused_bwd_kernel = true>
func.func @derived(%q: tensor<8x6x256x64xf32>, %k: tensor<8x6x256x64xf32>, %v: tensor<8x6x256x64xf32>) -> tensor<8x6x256x64xf32> {
  %o = sd.attention %q, %k, %v {sd.name = "attn_output"} : (tensor<8x6x256x64xf32>, tensor<8x6x256x64xf32>, tensor<8x6x256x64xf32>) -> tensor<8x6x256x64xf32>
  return %o : tensor<8x6x256x64xf32>
}

// -----

// Lengths the blocks do not divide, a mask and a given scale carry over
// unchanged: the last block is partial, never an error. Wider heads get
// smaller tiles from the same cache (128 at head_dim 128); block_kv, 512,
// is MaxDiffusion's default and not printed.
// CHECK-LABEL: func.func @masked_ragged
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x1000x128xf32>, %[[K:.*]]: tensor<1x2x77x128xf32>, %[[V:.*]]: tensor<1x2x77x128xf32>, %[[M:.*]]: tensor<1x1x1000x77xi1>)
// CHECK: sd.flash_attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale = 5.000000e-01 blocks = <block_q = 128, block_kv_compute = 128, block_q_dkv = 128, block_kv_dkv_compute = 128, block_q_dq = 128, use_fused_bwd_kernel = true> : {{.*}} -> (tensor<1x2x1000x128xf32>, tensor<1x2x1000xf32>)
func.func @masked_ragged(%q: tensor<1x2x1000x128xf32>, %k: tensor<1x2x77x128xf32>, %v: tensor<1x2x77x128xf32>, %m: tensor<1x1x1000x77xi1>) -> tensor<1x2x1000x128xf32> {
  %o = sd.attention %q, %k, %v mask %m scale = 0.5 : (tensor<1x2x1000x128xf32>, tensor<1x2x77x128xf32>, tensor<1x2x77x128xf32>, tensor<1x1x1000x77xi1>) -> tensor<1x2x1000x128xf32>
  return %o : tensor<1x2x1000x128xf32>
}

// -----

// attention=ring marks self-attention without a mask; cross-attention (a
// text context of other length) keeps whole keys (masked attention too:
// sd-tile-attention-masked-context.mlir).
// RING-LABEL: func.func @context_parallel
// RING: sd.flash_attention {{.*}} blocks = <{{.*}}> context_parallel = ring :
// RING: sd.flash_attention {{.*}} blocks = <{{.*}}> :
// RING-NOT: context_parallel
// attention=ulysses_ring marks the same op, with its group size.
// HYBRID-LABEL: func.func @context_parallel
// HYBRID: sd.flash_attention {{.*}} blocks = <{{.*}}> context_parallel = ulysses_ring ulysses_shards = 2 :
// HYBRID-NOT: context_parallel
func.func @context_parallel(%q: tensor<1x2x64x8xf32>, %c: tensor<1x2x16x8xf32>) -> (tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) {
  %self = sd.attention %q, %q, %q : (tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) -> tensor<1x2x64x8xf32>
  %cross = sd.attention %q, %c, %c : (tensor<1x2x64x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x64x8xf32>
  return %self, %cross : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>
}
