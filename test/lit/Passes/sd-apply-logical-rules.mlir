// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-apply-logical-rules | FileCheck %s
// RUN: sdopt %s -split-input-file -sd-apply-logical-rules="rules=%sd_src_root/test/data/rules/custom.yml" | FileCheck %s --check-prefix=YAML

// The dit preset: parameters split embed over fsdp and heads/mlp over
// tensor; the batch goes over data then fsdp.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @dit_preset
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}, {}, {}]>
// YAML-LABEL: func.func @dit_preset
// YAML-SAME: sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>
// YAML-SAME: sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}, {}, {}]>
func.func @dit_preset(
    %w: tensor<64x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>},
    %x: tensor<8x4x4x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>}) {
  return
}

// -----

// A mesh axis is used once per tensor: the batch takes data and fsdp, so
// embed (fsdp) stays whole.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @axis_used_once
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}, {}]>
func.func @axis_used_once(
    %x: tensor<8x16x64xf32> {sd.logical_axes = #sd.logical_axes<[activation_batch, activation_length, embed]>}) {
  return
}

// -----

// Axes a rule names but the mesh lacks are dropped; names without a rule
// and unnamed dimensions stay whole.
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @missing_axes
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {}]>
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{}, {}]>
func.func @missing_axes(
    %x: tensor<8x3x64xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, embed]>},
    %w: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, unknown_name]>}) {
  return
}

// -----

// An explicit sharding wins over the rules.
sd.mesh @mesh = <["fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @explicit_kept
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>
func.func @explicit_kept(
    %w: tensor<64x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>,
                           sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}) {
  return
}

// -----

// Sharding constraints written with logical names get a mesh sharding.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @constraint
// CHECK: sd.sharding_constraint %{{.*}} sharding = <@mesh, [{"data"}, {}, {"tensor"}]> logical = <[activation_batch, activation_length, activation_heads]>
func.func @constraint(%x: tensor<8x16x4xf32>) -> tensor<8x16x4xf32> {
  %y = sd.sharding_constraint %x logical = <[activation_batch, activation_length, activation_heads]> : tensor<8x16x4xf32>
  return %y : tensor<8x16x4xf32>
}

// -----

// A dimension its mesh axes do not divide is padded, as GSPMD pads: the
// constraint keeps its axes (40 heads over tensor:3: blocks of 14), and so
// does an argument (Wan2.1's 40 heads; a batch of 6 over data:4).
sd.mesh @mesh = <["data"=2, "tensor"=3]>
// CHECK-LABEL: func.func @constraint_not_divisible
// CHECK: sd.sharding_constraint %{{.*}} sharding = <@mesh, [{"data"}, {"tensor"}]> logical = <[activation_batch, activation_heads]>
func.func @constraint_not_divisible(%x: tensor<8x40xf32>) -> tensor<8x40xf32> {
  %y = sd.sharding_constraint %x logical = <[activation_batch, activation_heads]> {sd.name = "attn_output"} : tensor<8x40xf32>
  return %y : tensor<8x40xf32>
}

// -----

sd.mesh @mesh = <["data"=4, "tensor"=3]>
// CHECK-LABEL: func.func @arguments_not_divisible
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>
func.func @arguments_not_divisible(
    %w: tensor<64x40xf32> {sd.role = #sd.param<"blocks.0.attn.q.weight", xavier_uniform>,
                           sd.logical_axes = #sd.logical_axes<[embed, heads]>},
    %x: tensor<6x4xf32> {sd.role = #sd.input<latents>,
                         sd.logical_axes = #sd.logical_axes<[batch, _]>}) {
  return
}

// -----

// Functions without logical names need no mesh.
// CHECK-LABEL: func.func @nothing_to_do
// CHECK-NOT: sd.sharding
func.func @nothing_to_do(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// A donated result (the planner builds the training step before the rules)
// takes its argument's sharding; one with its own keeps it, and a result
// that aliases nothing gets none.
sd.mesh @mesh = <["fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @donated_results
// CHECK-SAME: -> (tensor<64x128xf32> {sd.aliases = 0 : i64, sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>}, tensor<64x128xf32> {sd.aliases = 1 : i64, sd.sharding = #sd.sharding<@mesh, [{}, {}]>}, tensor<64x128xf32>)
func.func @donated_results(
    %w: tensor<64x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>},
    %v: tensor<64x128xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>})
    -> (tensor<64x128xf32> {sd.aliases = 0 : i64},
        tensor<64x128xf32> {sd.aliases = 1 : i64, sd.sharding = #sd.sharding<@mesh, [{}, {}]>},
        tensor<64x128xf32>) {
  return %w, %v, %w : tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>
}
