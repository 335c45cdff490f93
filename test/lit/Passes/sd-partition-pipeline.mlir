// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-propagate-sharding -sd-partition -sd-optimize-collectives | FileCheck %s
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --sd-default-pipeline="mesh=data:2,fsdp:2,context:2,tensor:2 partition=true" -verify-diagnostics | FileCheck %s --check-prefix=DIT

// Megatron MLP, propagated and partitioned: the column-split then
// row-split weights need exactly one all_reduce (of the second dot's
// partial sum over tensor) and nothing else.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @megatron_mlp
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>}
// CHECK-SAME: %[[W1:.*]]: tensor<16x32xf32> {sd.local_sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>}
// CHECK-SAME: %[[W2:.*]]: tensor<32x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}
// CHECK-NOT: sd.all_
// CHECK: %[[H:.*]] = sd.dot_general %[[X]], %[[W1]] {{.*}} -> tensor<4x32xf32>
// CHECK-NOT: sd.all_
// CHECK: %[[O:.*]] = sd.dot_general %{{.*}}, %[[W2]] {{.*}} -> tensor<4x16xf32>
// CHECK-NEXT: %[[R:.*]] = sd.all_reduce %[[O]] @mesh axes = ["tensor"] : tensor<4x16xf32>
// CHECK-NEXT: sd.add %[[R]], %[[X]] : tensor<4x16xf32>
// CHECK-NOT: sd.all_
// CHECK-NOT: sd.reduce_scatter
func.func @megatron_mlp(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                        %w1: tensor<16x64xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>},
                        %w2: tensor<64x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}) -> tensor<8x16xf32> {
  %h = sd.dot_general %x, %w1 batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = sd.gelu %h : tensor<8x64xf32>
  %o = sd.dot_general %g, %w2 batch = [] x [] contract = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %y = sd.add %o, %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// The checked-in DiT on all four axes (batch 8 over data and fsdp, the
// sequence over context through the attention's activation constraints,
// heads and MLP over tensor): local types, parameters gathered where used,
// keys and values gathered over context for the untiled attention, the
// loss a partial sum over the batch and sequence axes until its
// all_reduce, and no global construct left.

// DIT-LABEL: func.func @loss
// DIT-SAME: tensor<2x32x32x4xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}, {}, {}]>
// DIT-SAME: -> (tensor<f32> {sd.local_sharding = #sd.sharding<@mesh, []>})
// DIT-NOT: sd.reshard
// DIT-NOT: sd.sharding =
// DIT: %[[EIGHTH:.*]] = sd.constant dense<1.250000e-01> : tensor<f32>
// DIT-NOT: sd.reshard
// DIT-NOT: sd.sharding =
// DIT: sd.attention {{.*}} : (tensor<2x2x128x16xf32>, tensor<2x2x256x16xf32>, tensor<2x2x256x16xf32>) -> tensor<2x2x128x16xf32>
// DIT-NOT: sd.reshard
// DIT-NOT: sd.sharding =
// DIT: %[[LOSS:.*]] = sd.mse_loss {{.*}} : tensor<2x16x32x4xf32>
// DIT-NEXT: %[[PARTIAL:.*]] = sd.mul %[[LOSS]], %[[EIGHTH]] : tensor<f32>
// DIT-NEXT: %[[TOTAL:.*]] = sd.all_reduce %[[PARTIAL]] @mesh axes = ["data", "fsdp", "context"] : tensor<f32>
// DIT-NEXT: return %[[TOTAL]] : tensor<f32>
