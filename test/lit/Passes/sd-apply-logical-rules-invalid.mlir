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

// Logical names need a mesh to resolve against.
// expected-error @+1 {{no sd.mesh @mesh to apply logical axis rules against; pass --mesh or run sd-materialize-mesh}}
func.func @no_mesh(%x: tensor<8xf32> {sd.logical_axes = #sd.logical_axes<[batch]>}) {
  return
}
