// The pixel-space preset for scikit-learn's 8×8 digits: images
// [B, 8, 8, 1], patch 2 (a 4×4 grid of 16 tokens), 10 classes and the null
// class, epsilon prediction without learn_sigma, default batch 64, and
// @denoise, the network's prediction for a sampler.

// RUN: sdgen --preset=dit-digits 2>%t.sum | FileCheck %s
// RUN: FileCheck %s --check-prefix=SUM < %t.sum
// SUM: sdgen: dit-digits: 1.27M parameters (51 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined)

// CHECK-LABEL: func.func private @dit_block
// CHECK-SAME: (%{{.*}}: tensor<?x16x128xf32>, %{{.*}}: tensor<?x128xf32>

// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<128x4xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[128, 1, 2, 2]>}
// CHECK-SAME: tensor<11x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"y_embedder.embedding_table.weight", normal(0.02)>}
// CHECK-SAME: tensor<4x128xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"final_layer.linear.weight", zeros>}
// CHECK-SAME: %[[X0:[a-z0-9]+]]: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// CHECK-SAME: %[[NOISE:[a-z0-9]+]]: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}
// CHECK-SAME: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}
// CHECK-SAME: tensor<?x11xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>}
// CHECK-SAME: -> tensor<f32> attributes {sd.default_batch = 64 : i64, sd.prediction_type = #sd.prediction<epsilon>}
// CHECK-COUNT-4: call @dit_block
// One output channel per pixel: no learn_sigma slice.
// CHECK-NOT: sd.slice {{.*}} -> tensor<?x16x4x1xf32>
// CHECK: %[[PRED:.*]] = sd.reshape {{.*}} -> tensor<?x8x8x1xf32>
// CHECK-NEXT: sd.mse_loss %[[PRED]], %[[NOISE]] : tensor<?x8x8x1xf32>

// @denoise: @loss's parameters, then x_t, t and the labels; it starts
// from x_t (no noising) and returns the prediction in image layout.
// CHECK-LABEL: func.func @denoise
// CHECK-SAME: (%{{.*}}: tensor<128x4xf32> {sd.logical_axes = #sd.logical_axes<[embed, _]>, sd.role = #sd.param<"x_embedder.proj.weight", xavier_uniform, stored[128, 1, 2, 2]>}
// CHECK-SAME: tensor<2x128xf32> {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"final_layer.adaLN_modulation.1.bias", zeros, stored[256]>}, %[[XT:[a-z0-9]+]]: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// CHECK-SAME: %{{.*}}: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}
// CHECK-SAME: %{{.*}}: tensor<?x11xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<labels>})
// CHECK-SAME: -> tensor<?x8x8x1xf32> attributes {sd.default_batch = 64 : i64} {
// CHECK-NEXT: sd.reshape %[[XT]] : (tensor<?x8x8x1xf32>) -> tensor<?x4x2x4x2x1xf32>
// CHECK-COUNT-4: call @dit_block
// CHECK: %[[OUT:.*]] = sd.reshape {{.*}} -> tensor<?x8x8x1xf32>
// CHECK-NEXT: return %[[OUT]] : tensor<?x8x8x1xf32>

// sdopt reports on @loss by default; function=denoise partitions and
// costs @denoise (the batch of 64 split over data:2).
// RUN: sdopt %sd_src_root/models/dit_digits.mlir --mesh=data:2 --report | FileCheck %s --check-prefix=REPORT
// REPORT: sd report: @loss, mesh @mesh data:2 (2 devices)
// REPORT: parameters {{.*}} 51 tensors, 1,272,324 elements
// REPORT: inputs {{.*}} 4 tensors
// REPORT: FLOPs
// RUN: sdopt %sd_src_root/models/dit_digits.mlir --mesh=data:2 -sd-print-report=function=denoise | FileCheck %s --check-prefix=DENOISE
// DENOISE: sd report: @denoise, mesh @mesh data:2 (2 devices)
// DENOISE: parameters {{.*}} 51 tensors, 1,272,324 elements
// DENOISE: inputs {{.*}} 3 tensors
// DENOISE: FLOPs
// DENOISE-LABEL: func.func @denoise
// DENOISE-SAME: tensor<32x8x8x1xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}, {}, {}]>, sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// DENOISE-SAME: -> (tensor<32x8x8x1xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}, {}, {}]>})

// --latent-size=16 makes it the 16×16 variant (sddata digits
// --resolution=16): 64 tokens, the same parameters.
// RUN: sdgen --preset=dit-digits --latent-size=16 2>/dev/null | FileCheck %s --check-prefix=SIXTEEN
// SIXTEEN-LABEL: func.func private @dit_block
// SIXTEEN-SAME: tensor<?x64x128xf32>
// SIXTEEN-LABEL: func.func @denoise
// SIXTEEN-SAME: -> tensor<?x16x16x1xf32>
