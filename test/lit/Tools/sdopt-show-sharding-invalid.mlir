// --show-sharding needs a value that exists and has a sharding.
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:2 --show-sharding=nope 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:2 --show-sharding=ffn_activation 2>&1 | FileCheck %s --check-prefix=UNPROPAGATED
// RUN: not sdopt %S/Inputs/small_model.mlir --batch=8 --show-sharding=proj.weight 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not sdopt %S/Inputs/small_model.mlir -sd-show-sharding 2>&1 | FileCheck %s --check-prefix=EMPTY

// UNKNOWN: error: no parameter, input or sd.name called "nope" in @loss
// UNKNOWN-NOT: see current operation

// An op result gets its sharding from propagation (--stage=sharded).
// UNPROPAGATED: small_model.mlir:9:8: error: "ffn_activation" has no sharding yet (arguments get one from the logical axis rules, op results from sd-propagate-sharding)

// NOMESH: small_model.mlir:2:17: error: "proj.weight" has no sharding yet

// EMPTY: error: sd-show-sharding needs value=<parameter name, input kind or sd.name>
