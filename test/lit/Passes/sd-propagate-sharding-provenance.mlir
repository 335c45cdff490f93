// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-propagate-sharding="record-provenance explain=ffn_activation" | FileCheck %s
// RUN: sdopt %s -split-input-file -sd-propagate-sharding="explain=blocks.0.mlp.fc1.weight" 2>&1 >/dev/null | FileCheck %s --check-prefix=PARAM

// PARAM: remark: 'blocks.0.mlp.fc1.weight' is sharded #sd.sharding<@mesh, [{}, {"tensor"}]>; dim 1 (tensor) from parameter blocks.0.mlp.fc1.weight
// PARAM: warning: no value named 'blocks.0.mlp.fc1.weight' to explain in @constraint_source

// Each sharded result dimension says which annotation its axes came from
// and through which op they arrived.
sd.mesh @mesh = <["fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @provenance
// CHECK: sd.dot_general
// CHECK-SAME: sd.provenance = ["fsdp on dim 0 from input latents via sd.dot_general at sd-propagate-sharding-provenance.mlir:[[@LINE+7]]", "tensor on dim 1 from parameter blocks.0.mlp.fc1.weight via sd.dot_general at sd-propagate-sharding-provenance.mlir:[[@LINE+7]]"]
// CHECK: sd.gelu
// CHECK-SAME: sd.provenance = ["fsdp on dim 0 from input latents via sd.gelu at sd-propagate-sharding-provenance.mlir:[[@LINE+7]]", "tensor on dim 1 from parameter blocks.0.mlp.fc1.weight via sd.gelu at sd-propagate-sharding-provenance.mlir:[[@LINE+7]]"]
func.func @provenance(
    %x: tensor<8x16xf32> {sd.role = #sd.input<latents>, sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>},
    %w: tensor<16x32xf32> {sd.role = #sd.param<"blocks.0.mlp.fc1.weight", xavier_uniform>,
                           sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>}) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  // expected-remark-re @+1 {{'ffn_activation' is sharded #sd.sharding<@mesh, [{"fsdp", ?}, {"tensor", ?}]>; dim 0 (fsdp) via sd.gelu at sd-propagate-sharding-provenance.mlir:{{[0-9]+}} via sd.dot_general at sd-propagate-sharding-provenance.mlir:{{[0-9]+}} from input latents; dim 1 (tensor) via sd.gelu at {{.*}} via sd.dot_general at {{.*}} from parameter blocks.0.mlp.fc1.weight}}
  %g = sd.gelu %y {sd.name = "ffn_activation"} : tensor<8x32xf32>
  return %g : tensor<8x32xf32>
}

// -----

// A named constraint is a source too, and so is an unnamed argument; a
// partial sum is reported as such.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @constraint_source
// CHECK: sd.neg
// CHECK-SAME: sd.provenance = ["data on dim 0 from sd.sharding_constraint \22hidden\22 at sd-propagate-sharding-provenance.mlir:[[@LINE+6]] via sd.neg at sd-propagate-sharding-provenance.mlir:[[@LINE+7]]", "tensor on dim 1 from argument #1 via sd.dot_general at sd-propagate-sharding-provenance.mlir:[[@LINE+8]]"]
// CHECK: sd.dot_general
// CHECK-SAME: sd.provenance = ["data on dim 0 from sd.sharding_constraint \22hidden\22 at sd-propagate-sharding-provenance.mlir:[[@LINE+4]] via sd.dot_general at sd-propagate-sharding-provenance.mlir:[[@LINE+6]]", "partial sum over tensor"]
// expected-warning @+1 {{no value named 'ffn_activation' to explain in @constraint_source}}
func.func @constraint_source(%x: tensor<8x16xf32>,
                             %w: tensor<16x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}) -> tensor<8x4xf32> {
  %c = sd.sharding_constraint %x sharding = <@mesh, [{"data"}, {}]> {sd.name = "hidden"} : tensor<8x16xf32>
  %n = sd.neg %c : tensor<8x16xf32>
  %y = sd.dot_general %n, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
