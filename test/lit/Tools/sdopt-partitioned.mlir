// By default --mesh ends in the per-device program: local types, each
// argument's layout as sd.local_sharding, and the collectives it needs.
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 | FileCheck %s
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --stage=partitioned | FileCheck %s

// CHECK: sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%[[W:.*]]: tensor<8x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>
// CHECK-SAME: %[[X:.*]]: tensor<2x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>
// CHECK-SAME: %[[T:.*]]: tensor<2x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {"tensor"}]>
// FSDP: the weight's fsdp shard is gathered before use.
// CHECK: %[[G:.*]] = sd.all_gather %[[W]] @mesh [{"fsdp"}, {}] : (tensor<8x16xf32>) -> tensor<16x16xf32>
// CHECK: %[[Y:.*]] = sd.dot_general %[[X]], %[[G]] {{.*}} : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
// The loss of each device's block is a partial sum of the global mean.
// CHECK: %[[L:.*]] = sd.mse_loss %[[Y]], %[[T]] : tensor<2x16xf32>
// CHECK: %[[S:.*]] = sd.mul %[[L]], %{{.*}} : tensor<f32>
// CHECK: %[[R:.*]] = sd.all_reduce %[[S]] @mesh axes = ["data", "fsdp", "tensor"] : tensor<f32>
// CHECK: return %[[R]] : tensor<f32>
