// The mission's command on the bundled model: the default batch (8) does
// not divide the 32 devices, so sdopt picks 32 and says so.
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:8,fsdp:4 --report 2>&1 | FileCheck %s
// CHECK: remark: batch 32 (the program's default 8 does not divide the 32 devices its batch dimension is sharded over; --batch=N sets another)
// CHECK-NOT: error

// Rules files with errors point at their line, not at <unknown>:0.
// RUN: not sdopt %S/Inputs/small_model.mlir --sd-materialize-mesh=mesh=data:2 --sd-apply-logical-rules=rules=%S/../E2E/Inputs/alias_rules.yml 2>&1 | FileCheck %s --check-prefix=RULES
// RULES: alias_rules.yml:2:0: error: anchors (&name) and aliases (*name) are not supported; write the value out
// RULES-NOT: <unknown>
