// --show-sharding=NAME draws which device holds which block of a value
// instead of printing the IR: rows are blocks of dimension 0, columns of
// dimension 1, each cell lists its devices (replicas together).
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --show-sharding=proj.weight | FileCheck %s --check-prefix=PARAM
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --show-sharding=latents | FileCheck %s --check-prefix=INPUT
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --stage=sharded --show-sharding=ffn_activation | FileCheck %s --check-prefix=NAMED
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=fsdp:2 --dcn-mesh=data:2 --show-sharding=latents | FileCheck %s --check-prefix=DCN
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=fsdp:2 --dcn-mesh=data:2 --show-sharding=proj.weight | FileCheck %s --check-prefix=DCNW
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:2,fsdp:4 --show-sharding=latents | FileCheck %s --check-prefix=RANK4
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:2,fsdp:4 --show-sharding=blocks.0.mlp.fc1.weight | FileCheck %s --check-prefix=DIT
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:2,fsdp:4 --stage=sharded --show-sharding=query_proj | FileCheck %s --check-prefix=MANY

// Device ids are row-major over (data, fsdp, tensor): id = 4d + 2f + t.
// The weight [{"fsdp"}, {"tensor"}]: block (f, t) is on 2f + t and 4 + 2f + t.
// PARAM-LABEL: proj.weight: tensor<16x32xf32> #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]> on mesh @mesh data:2,fsdp:2,tensor:2 (8 devices)
// PARAM-NEXT:  rows: dimension 0 (16): 2 blocks of 8 over fsdp
// PARAM-NEXT:  columns: dimension 1 (32): 2 blocks of 16 over tensor
// PARAM-NEXT:  +-----+-----+
// PARAM-NEXT:  | 0,4 | 1,5 |
// PARAM-NEXT:  +-----+-----+
// PARAM-NEXT:  | 2,6 | 3,7 |
// PARAM-NEXT:  +-----+-----+

// The batch over (data, fsdp): block 2d + f, replicated over tensor.
// INPUT-LABEL: latents: tensor<8x16xf32> #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>
// INPUT-NEXT:  rows: dimension 0 (8): 4 blocks of 2 over data,fsdp
// INPUT-NEXT:  columns: dimension 1 (16): whole
// INPUT-NEXT:  +-----+
// INPUT-NEXT:  | 0,1 |
// INPUT-NEXT:  +-----+
// INPUT-NEXT:  | 2,3 |
// INPUT-NEXT:  +-----+
// INPUT-NEXT:  | 4,5 |
// INPUT-NEXT:  +-----+
// INPUT-NEXT:  | 6,7 |
// INPUT-NEXT:  +-----+

// An sd.name after propagation: one device per block.
// NAMED-LABEL: ffn_activation: tensor<8x32xf32> #sd.sharding<@mesh, [{"data", "fsdp", ?}, {"tensor", ?}]>
// NAMED:       +---+---+
// NAMED-NEXT:  | 0 | 1 |
// NAMED-NEXT:  +---+---+
// NAMED-NEXT:  | 2 | 3 |

// With data across processes, ids are process-major: id = 2·data + fsdp
// although data is the minor mesh axis. The batch over (data, fsdp) is
// block 2·data + fsdp = the id; the weight's fsdp blocks are held by
// {fsdp, 2 + fsdp}.
// DCN-LABEL: latents: {{.*}} on mesh @mesh fsdp:2,data:2(dcn=2) (4 devices)
// DCN:       | 0 |
// DCN-NEXT:  +---+
// DCN-NEXT:  | 1 |
// DCN-NEXT:  +---+
// DCN-NEXT:  | 2 |
// DCN-NEXT:  +---+
// DCN-NEXT:  | 3 |
// DCNW-LABEL: proj.weight: tensor<16x32xf32> #sd.sharding<@mesh, [{"fsdp"}, {}]>
// DCNW:       | 0,2 |
// DCNW-NEXT:  +-----+
// DCNW-NEXT:  | 1,3 |

// Rank 4: dimensions 0 and 1 are drawn, the others described.
// RANK4-LABEL: latents: tensor<8x32x32x4xf32> #sd.sharding<@mesh, [{"data", "fsdp"}, {}, {}, {}]>
// RANK4-NEXT:  rows: dimension 0 (8): 8 blocks of 1 over data,fsdp
// RANK4-NEXT:  columns: dimension 1 (32): whole
// RANK4-NEXT:  not drawn: dimensions 2-3 (whole)
// RANK4-NEXT:  +---+
// RANK4-NEXT:  | 0 |
// RANK4-COUNT-7: +---+

// A DiT weight, logical axes [mlp, embed] (PyTorch's [out, in]): the dit
// rules split embed over fsdp; mlp would go to tensor, which this mesh
// lacks. Each fsdp block is held by its two data replicas.
// DIT-LABEL: blocks.0.mlp.fc1.weight: tensor<1536x384xf32> #sd.sharding<@mesh, [{}, {"fsdp"}]>
// DIT-NEXT:  rows: dimension 0 (1536): whole
// DIT-NEXT:  columns: dimension 1 (384): 4 blocks of 96 over fsdp
// DIT-NEXT:  +-----+-----+-----+-----+
// DIT-NEXT:  | 0,4 | 1,5 | 2,6 | 3,7 |
// DIT-NEXT:  +-----+-----+-----+-----+

// A name the inlined blocks share: the first, and how many there are.
// MANY-LABEL: query_proj: tensor<8x256x384xf32> {{.*}} (8 devices), the first of 12 values named so
// MANY-NEXT:  rows: dimension 0 (8): 8 blocks of 1 over data,fsdp
