// --stage=sharded inlines and propagates; --explain says where a sharding
// comes from.
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,tensor:2 --stage=sharded | FileCheck %s --check-prefix=SHARDED
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,tensor:2 --explain=ffn_activation -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: not sdopt %S/Inputs/small_model.mlir --stage=sharded 2>&1 | FileCheck %s --check-prefix=NOMESH

// SHARDED-LABEL: func.func @loss
// SHARDED: sd.dot_general {{.*}}sd.name = "ffn_activation", sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>
// SHARDED: sd.mse_loss {{.*}}unreduced = ["data", "tensor"]

// EXPLAIN: remark: 'ffn_activation' is sharded
// EXPLAIN-SAME: from parameter proj.weight

// NOMESH: error: --stage and --explain need --mesh
