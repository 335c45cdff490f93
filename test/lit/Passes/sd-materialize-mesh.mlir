// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-materialize-mesh="mesh=data:8,fsdp:4" | FileCheck %s --check-prefix=PLAIN
// RUN: sdopt %s -split-input-file -sd-materialize-mesh="mesh=data:2,fsdp:-1 devices=8" | FileCheck %s --check-prefix=FILL
// RUN: sdopt %s -split-input-file -sd-materialize-mesh="mesh=fsdp:4 dcn-mesh=data:2" | FileCheck %s --check-prefix=DCN
// RUN: sdopt %s -split-input-file -sd-materialize-mesh="mesh=context:-1 dcn-mesh=context:-1 devices=16 processes=2" | FileCheck %s --check-prefix=BOTHFILL
// RUN: sdopt %s -split-input-file -sd-materialize-mesh="mesh=tensor:2 mesh-name=tp" | FileCheck %s --check-prefix=NAMED

// PLAIN-LABEL: module
// PLAIN-NEXT: sd.mesh @mesh = <["data"=8, "fsdp"=4]>
// FILL: sd.mesh @mesh = <["data"=2, "fsdp"=4]>
// DCN: sd.mesh @mesh = <["fsdp"=4, "data"=2(dcn=2)]>
// BOTHFILL: sd.mesh @mesh = <["context"=16(dcn=2)]>
// NAMED: sd.mesh @tp = <["tensor"=2]>
// NAMED-NEXT: func.func @f
func.func @f() {
  return
}

// -----

// An existing mesh of the same name is replaced, so the pass can be re-run.
// PLAIN-LABEL: module
// PLAIN: sd.mesh @mesh = <["data"=8, "fsdp"=4]>
// PLAIN-NOT: "tensor"=2
sd.mesh @mesh = <["tensor"=2]>
