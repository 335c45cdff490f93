// The default pipeline: --mesh materializes the mesh, the batch is fixed and
// every argument gets a sharding from the logical axis rules.
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --stage=rules | FileCheck %s --check-prefix=DIT
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:-1 --devices=8 --batch=16 --stage=rules | FileCheck %s --check-prefix=FILL
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=fsdp:2 --dcn-mesh=data:2 --stage=rules | FileCheck %s --check-prefix=DCN
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=context:2,fsdp:2,tensor:2 --rules=wan --stage=rules | FileCheck %s --check-prefix=WAN
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=context:4 --per-device-batch=0.25 --stage=rules | FileCheck %s --check-prefix=FRACTION
// RUN: sdopt %S/Inputs/small_model.mlir --batch=2 | FileCheck %s --check-prefix=BATCHONLY

// DIT: sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// DIT-LABEL: func.func @loss
// DIT-SAME: tensor<16x32xf32> {{.*}}sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>
// DIT-SAME: tensor<8x16xf32> {{.*}}sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>
// DIT-SAME: tensor<8x32xf32> {{.*}}sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {"tensor"}]>

// FILL: sd.mesh @mesh = <["data"=2, "fsdp"=4]>
// FILL: tensor<16x16xf32> {{.*}}sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>

// DCN: sd.mesh @mesh = <["fsdp"=2, "data"=2(dcn=2)]>

// WAN: sd.mesh @mesh = <["context"=2, "fsdp"=2, "tensor"=2]>
// WAN: tensor<16x32xf32> {{.*}}sd.sharding = #sd.sharding<@mesh, [{"context", "fsdp"}, {"tensor"}]>

// A fractional per-device batch is legal when the global batch is whole
// (here the batch is not split: the mesh is all context parallelism).
// FRACTION: tensor<1x16xf32>

// BATCHONLY-NOT: sd.mesh
// BATCHONLY: tensor<2x16xf32>
// BATCHONLY-NOT: sd.sharding
