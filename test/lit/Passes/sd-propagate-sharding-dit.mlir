// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --inline --sd-specialize-batch --sd-materialize-mesh="mesh=fsdp:2,tensor:2" --sd-apply-logical-rules --sd-propagate-sharding -verify-diagnostics | FileCheck %s
// The default pipeline with propagation gives the same program.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --sd-default-pipeline="mesh=fsdp:2,tensor:2 propagate=true" | FileCheck %s

// The checked-in DiT on fsdp=2, tensor=2 with the dit rules: the batch
// (latents) goes over fsdp, the attention projection's heads over tensor
// (backward from the row-split output projection, through the attention,
// the transposes and the head-splitting reshapes), and the loss is a
// partial sum over fsdp until it is reduced for the return.

// CHECK-LABEL: func.func @loss
// CHECK: sd.reshape {{.*}} {sd.name = "query_proj", sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {?}, {"tensor", ?}]>]>}
// CHECK: sd.transpose {{.*}} {sd.name = "xq_out", sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {"tensor", ?}, {?}, {?}]>]>}
// CHECK: sd.attention {{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {"tensor", ?}, {?}, {?}]>]>}
// CHECK: sd.reshape {{.*}} {sd.name = "attn_output", sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {?}, {"tensor", ?}]>]>}
// CHECK: %[[LOSS:.*]] = sd.mse_loss {{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [], unreduced = ["fsdp"]>]>}
// CHECK: %[[REDUCED:.*]] = sd.reshard %[[LOSS]] sharding = <@mesh, []>
// CHECK: return %[[REDUCED]] : tensor<f32>
