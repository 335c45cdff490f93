// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-apply-logical-rules
// RUN: not sdopt %s -split-input-file -sd-apply-logical-rules="rules=nope" 2>&1 | FileCheck %s --check-prefix=PRESET
// RUN: not sdopt %s -split-input-file -sd-apply-logical-rules="rules=%sd_src_root/test/data/rules/missing.yml" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not sdopt %s -split-input-file -sd-apply-logical-rules="rules=%sd_src_root/test/data/rules/bad_rule_shape.yml" 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not sdopt %s -split-input-file -sd-apply-logical-rules="rules=%sd_src_root/test/data/rules/no_key.yml" 2>&1 | FileCheck %s --check-prefix=NOKEY

// PRESET: error: unknown logical axis rules preset "nope"; expected one of dit, sdxl, flux, wan
// MISSING: error: cannot read rules file "{{.*}}missing.yml": No such file or directory
// SHAPE: {{.*}}bad_rule_shape.yml:{{[0-9]+}}:0: error: rule must be [logical_name, mesh_axes]
// SHAPE-NOT: <unknown>
// NOKEY: error: {{.*}}no_key.yml: no logical_axis_rules key

// Wan2.1 has 40 heads: tensor=3 does not divide them.
sd.mesh @mesh = <["tensor"=3]>
// expected-error @+1 {{tensor "blocks.0.attn.q.weight" dimension 1 ("heads") of size 40 is not divisible by mesh axis "tensor" of size 3}}
func.func @heads_not_divisible(
    %w: tensor<64x40xf32> {sd.role = #sd.param<"blocks.0.attn.q.weight", xavier_uniform>,
                           sd.logical_axes = #sd.logical_axes<[embed, heads]>}) {
  return
}

// -----

// A batch of 6 does not fit data=4.
sd.mesh @mesh = <["data"=4]>
// expected-error @+1 {{tensor "latents" dimension 0 ("batch") of size 6 is not divisible by mesh axis "data" of size 4}}
func.func @batch_not_divisible(
    %x: tensor<6x4xf32> {sd.role = #sd.input<latents>,
                         sd.logical_axes = #sd.logical_axes<[batch, _]>}) {
  return
}

// -----

// Several axes are named together with their total size.
sd.mesh @mesh = <["data"=2, "fsdp"=3]>
// expected-error @+1 {{tensor "noise" dimension 0 ("batch") of size 8 is not divisible by mesh axes "data","fsdp" of total size 6}}
func.func @batch_not_divisible_two_axes(
    %x: tensor<8x4xf32> {sd.role = #sd.input<noise>,
                         sd.logical_axes = #sd.logical_axes<[batch, _]>}) {
  return
}


// -----

// Logical names need a mesh to resolve against.
// expected-error @+1 {{no sd.mesh @mesh to apply logical axis rules against; pass --mesh or run sd-materialize-mesh}}
func.func @no_mesh(%x: tensor<8xf32> {sd.logical_axes = #sd.logical_axes<[batch]>}) {
  return
}
