// --with-denoise adds @denoise to any preset: @loss's parameters, then the
// noised latents x_t (role latents) and @loss's inputs after the noise; it
// returns the network's prediction in latent layout and calls the same
// block functions. Without the flag the program has @loss only.

// RUN: sdgen --preset=dit-tiny 2>/dev/null | FileCheck %s --check-prefix=NONE
// NONE-NOT: @denoise

// DiT: labels, and learn_sigma's second half dropped as in @loss; @forward
// returns DiT's whole output, as the reference's forward() (sdsample
// --predict).
// RUN: sdgen --preset=dit-tiny --with-denoise 2>/dev/null | FileCheck %s --check-prefix=DIT
// DIT-LABEL: func.func @loss
// DIT-COUNT-2: call @dit_block
// DIT-LABEL: func.func @denoise
// DIT-SAME: (%{{.*}}: tensor<64x16xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[64, 4, 2, 2]>}
// DIT-SAME: %[[XT:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %{{.*}}: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %{{.*}}: tensor<?x1001xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>})
// DIT-SAME: -> tensor<?x32x32x4xf32> attributes {sd.default_batch = 8 : i64}
// DIT-NEXT: sd.reshape %[[XT]]
// DIT-COUNT-2: call @dit_block
// DIT: %[[ALL:.*]] = sd.reshape {{.*}} -> tensor<?x32x32x8xf32>
// DIT-NEXT: %[[OUT:.*]] = sd.slice %[[ALL]] start = [0, 0, 0, 0] limit = [-1, 32, 32, 4] strides = [1, 1, 1, 1] : (tensor<?x32x32x8xf32>) -> tensor<?x32x32x4xf32>
// DIT-NEXT: return %[[OUT]] : tensor<?x32x32x4xf32>
// DIT-LABEL: func.func @forward
// DIT-SAME: -> tensor<?x32x32x8xf32> attributes {sd.default_batch = 8 : i64}
// DIT-COUNT-2: call @dit_block
// DIT: %[[FULL:.*]] = sd.reshape {{.*}} -> tensor<?x32x32x8xf32>
// DIT-NEXT: return %[[FULL]] : tensor<?x32x32x8xf32>

// Wan: the text context after t; video latents [B, F, H, W, C].
// RUN: sdgen --preset=wan-long --with-denoise 2>/dev/null | FileCheck %s --check-prefix=WAN
// WAN-LABEL: func.func @denoise
// WAN-SAME: %[[XT:[a-z0-9]+]]: tensor<?x16x32x32x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _, _]>, sd.role = #sd.input<latents>}, %{{.*}}: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %{{.*}}: tensor<?x16x4096xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<context>})
// WAN-SAME: -> tensor<?x16x32x32x16xf32>
// WAN-NEXT: sd.reshape %[[XT]]
// WAN-COUNT-2: call @wan_block
// WAN: return %{{.*}} : tensor<?x16x32x32x16xf32>

// Flux: the text context, the pooled vector and the distilled guidance of
// each sample; the image tokens of the
// joint output, unpatchified channel-major ("(h w) (c ph pw)").
// RUN: sdgen --preset=flux-dev --depth=1 --hidden=256 --heads=2 --height=64 --width=64 --text-length=8 --with-denoise 2>/dev/null | FileCheck %s --check-prefix=FLUX
// FLUX-LABEL: func.func @denoise
// FLUX-SAME: %{{.*}}: tensor<?x8x8x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}, %{{.*}}: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}, %{{.*}}: tensor<?x8x4096xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<context>}, %{{.*}}: tensor<?x768xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<pooled>}, %{{.*}}: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<guidance>})
// FLUX-SAME: -> tensor<?x8x8x16xf32>
// FLUX-COUNT-1: call @flux_double_block
// FLUX-COUNT-2: call @flux_single_block
// FLUX: %[[IMG:.*]] = sd.slice %{{.*}} start = [0, 8, 0] limit = [-1, 24, 64] strides = [1, 1, 1] : (tensor<?x24x64xf32>) -> tensor<?x16x64xf32>
// FLUX: %[[CELLS:.*]] = sd.reshape %[[IMG]] : (tensor<?x16x64xf32>) -> tensor<?x4x4x16x2x2xf32>
// FLUX: sd.transpose %[[CELLS]] permutation = [0, 1, 4, 2, 5, 3]
// FLUX: return %{{.*}} : tensor<?x8x8x16xf32>

// sdopt specializes and partitions @denoise beside @loss: both get the
// batch, and the block function serves both.
// RUN: sdgen --preset=dit-tiny --with-denoise 2>/dev/null | sdopt --batch=4 | FileCheck %s --check-prefix=BATCH
// BATCH-LABEL: func.func private @dit_block
// BATCH-SAME: tensor<4x256x64xf32>
// BATCH-LABEL: func.func @loss
// BATCH-LABEL: func.func @denoise
// BATCH-SAME: -> tensor<4x32x32x4xf32>
// BATCH: call @dit_block({{.*}}) : (tensor<4x256x64xf32>
