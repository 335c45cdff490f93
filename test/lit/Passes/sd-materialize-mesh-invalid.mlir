// Each bad mesh specification is one clear error on the module, and only one.
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:0" 2>&1 | FileCheck %s --check-prefix=ZERO --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:-2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:x" 2>&1 | FileCheck %s --check-prefix=NONNUMERIC --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:2,data:4" 2>&1 | FileCheck %s --check-prefix=DUPLICATE --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:-1,fsdp:-1 devices=8" 2>&1 | FileCheck %s --check-prefix=TWOFILL --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:8,fsdp:4 devices=16" 2>&1 | FileCheck %s --check-prefix=MISMATCH --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=" 2>&1 | FileCheck %s --check-prefix=EMPTY --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data8" 2>&1 | FileCheck %s --check-prefix=MALFORMED --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=context:-1" 2>&1 | FileCheck %s --check-prefix=NODEVICES --implicit-check-not=error:
// RUN: not sdopt %s -sd-materialize-mesh="mesh=data:2,context:-1 devices=7" 2>&1 | FileCheck %s --check-prefix=NOTWHOLE --implicit-check-not=error:

// ZERO: error: mesh axis "data" has size 0; sizes must be positive or -1
// NEGATIVE: error: mesh axis "data" has size -2; sizes must be positive or -1
// NONNUMERIC: error: mesh axis "data" has non-numeric size "x"
// DUPLICATE: error: mesh axis "data" appears twice
// TWOFILL: error: mesh axes "data" and "fsdp" are both -1; at most one ICI axis may be -1
// MISMATCH: error: mesh data:8,fsdp:4 has 32 devices but --devices=16
// EMPTY: error: empty mesh specification
// MALFORMED: error: malformed mesh entry "data8"; expected axis:size
// NODEVICES: error: mesh axis "context" is -1 but the device count is unknown; pass --devices=N
// NOTWHOLE: error: cannot fill mesh axis "context"
module {}
