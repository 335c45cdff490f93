// RUN: sdopt %s -split-input-file -verify-diagnostics | sdopt -split-input-file | FileCheck %s
// RUN: sdopt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | sdopt -split-input-file | FileCheck %s

// Round trip of the collectives (per-device programs, after partitioning)
// and of sd.reshard (global programs), in the custom and the generic syntax.
// One case per chunk; each names its function.

// all_gather over one axis of one dimension, and over two axes of one
// dimension (major to minor: the order is kept).
// CHECK-LABEL: func.func @all_gather
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>)
// CHECK: %[[A:.*]] = sd.all_gather %[[X]] @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK: sd.all_gather %[[A]] @mesh [{}, {"tensor", "data"}] : (tensor<4x8xf32>) -> tensor<4x32xf32>
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
func.func @all_gather(%x: tensor<2x8xf32>) -> tensor<4x32xf32> {
  %a = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %b = sd.all_gather %a @mesh [{}, {"tensor", "data"}] : (tensor<4x8xf32>) -> tensor<4x32xf32>
  return %b : tensor<4x32xf32>
}

// -----

// all_slice of two dimensions at once, on bf16.
// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>)
// CHECK: sd.all_slice %[[X]] @mesh [{"data"}, {"fsdp"}] {sd.name = "sliced"} : (tensor<4x8xbf16>) -> tensor<2x4xbf16>
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice(%x: tensor<4x8xbf16>) -> tensor<2x4xbf16> {
  %y = sd.all_slice %x @mesh [{"data"}, {"fsdp"}] {sd.name = "sliced"} : (tensor<4x8xbf16>) -> tensor<2x4xbf16>
  return %y : tensor<2x4xbf16>
}

// -----

// all_reduce over one axis and over two; axes on a DCN mesh.
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[A:.*]] = sd.all_reduce %[[X]] @mesh axes = ["data"] : tensor<4x8xf32>
// CHECK: sd.all_reduce %[[A]] @mesh axes = ["fsdp", "data"] : tensor<4x8xf32>
sd.mesh @mesh = <["data"=4(dcn=2), "fsdp"=2]>
func.func @all_reduce(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x8xf32>
  %b = sd.all_reduce %a @mesh axes = ["fsdp", "data"] : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// reduce_scatter of a gradient over the FSDP axis.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME: (%[[G:.*]]: tensor<384x1152xf32>)
// CHECK: sd.reduce_scatter %[[G]] @mesh [{"fsdp"}, {}] : (tensor<384x1152xf32>) -> tensor<96x1152xf32>
sd.mesh @mesh = <["data"=2, "fsdp"=4]>
func.func @reduce_scatter(%g: tensor<384x1152xf32>) -> tensor<96x1152xf32> {
  %y = sd.reduce_scatter %g @mesh [{"fsdp"}, {}] : (tensor<384x1152xf32>) -> tensor<96x1152xf32>
  return %y : tensor<96x1152xf32>
}

// -----

// all_to_all from sequence to head sharding (Ulysses), and back.
// CHECK-LABEL: func.func @all_to_all
// CHECK-SAME: (%[[X:.*]]: tensor<2x6x64x64xf32>)
// CHECK: %[[A:.*]] = sd.all_to_all %[[X]] @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 : (tensor<2x6x64x64xf32>) -> tensor<2x3x128x64xf32>
// CHECK: sd.all_to_all %[[A]] @mesh axes = ["context"] src_dim = 1 tgt_dim = 2 : (tensor<2x3x128x64xf32>) -> tensor<2x6x64x64xf32>
sd.mesh @mesh = <["data"=2, "context"=2]>
func.func @all_to_all(%x: tensor<2x6x64x64xf32>) -> tensor<2x6x64x64xf32> {
  %a = sd.all_to_all %x @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 : (tensor<2x6x64x64xf32>) -> tensor<2x3x128x64xf32>
  %b = sd.all_to_all %a @mesh axes = ["context"] src_dim = 1 tgt_dim = 2 : (tensor<2x3x128x64xf32>) -> tensor<2x6x64x64xf32>
  return %b : tensor<2x6x64x64xf32>
}

// -----

// collective_permute: a ring shift forward along one axis, a swap of
// blocks across two axes (members are row-major over the listed axes, here
// fsdp major), and one without pairs.
// CHECK-LABEL: func.func @collective_permute
// CHECK-SAME: (%[[KV:.*]]: tensor<2x8x64x64xbf16>)
// CHECK: %[[A:.*]] = sd.collective_permute %[[KV]] @mesh axes = ["context"] pairs = {{\[}}[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<2x8x64x64xbf16>
// CHECK: %[[B:.*]] = sd.collective_permute %[[A]] @mesh axes = ["fsdp", "context"] pairs = {{\[}}[1, 4], [4, 1]] : tensor<2x8x64x64xbf16>
// CHECK: sd.collective_permute %[[B]] @mesh axes = ["context"] pairs = [] : tensor<2x8x64x64xbf16>
sd.mesh @mesh = <["fsdp"=2, "context"=4]>
func.func @collective_permute(%kv: tensor<2x8x64x64xbf16>) -> tensor<2x8x64x64xbf16> {
  %a = sd.collective_permute %kv @mesh axes = ["context"] pairs = [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<2x8x64x64xbf16>
  %b = sd.collective_permute %a @mesh axes = ["fsdp", "context"] pairs = [[1, 4], [4, 1]] : tensor<2x8x64x64xbf16>
  %c = sd.collective_permute %b @mesh axes = ["context"] pairs = [] : tensor<2x8x64x64xbf16>
  return %c : tensor<2x8x64x64xbf16>
}

// -----

// all_to_all within subgroups of 2 consecutive members of the context:4
// group (hybrid Ulysses-ring attention's Ulysses groups).
// CHECK-LABEL: func.func @all_to_all_subgroups
// CHECK: sd.all_to_all %{{.*}} @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 subgroup_size = 2 : (tensor<2x8x16x64xf32>) -> tensor<2x4x32x64xf32>
sd.mesh @mesh = <["context"=4]>
func.func @all_to_all_subgroups(%x: tensor<2x8x16x64xf32>) -> tensor<2x4x32x64xf32> {
  %y = sd.all_to_all %x @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 subgroup_size = 2 : (tensor<2x8x16x64xf32>) -> tensor<2x4x32x64xf32>
  return %y : tensor<2x4x32x64xf32>
}

// -----

// The asynchronous permute: a start, work in between, and its done, which
// names the start's operand to keep it alive.
// CHECK-LABEL: func.func @collective_permute_async
// CHECK-SAME: (%[[KV:.*]]: tensor<2x8x64x64xf32>)
// CHECK: %[[P:.*]] = sd.collective_permute_start %[[KV]] @mesh axes = ["context"] pairs = {{\[}}[0, 1], [1, 0]] : tensor<2x8x64x64xf32>
// CHECK: %[[W:.*]] = sd.exp %[[KV]]
// CHECK: %[[D:.*]] = sd.collective_permute_done %[[P]], %[[KV]] : tensor<2x8x64x64xf32>
// CHECK: sd.add %[[W]], %[[D]]
sd.mesh @mesh = <["context"=2]>
func.func @collective_permute_async(%kv: tensor<2x8x64x64xf32>) -> tensor<2x8x64x64xf32> {
  %p = sd.collective_permute_start %kv @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<2x8x64x64xf32>
  %w = sd.exp %kv : tensor<2x8x64x64xf32>
  %d = sd.collective_permute_done %p, %kv : tensor<2x8x64x64xf32>
  %y = sd.add %w, %d : tensor<2x8x64x64xf32>
  return %y : tensor<2x8x64x64xf32>
}

// -----

// reshard in a global program, with a replicated axis and a dynamic batch.
// CHECK-LABEL: func.func @reshard
// CHECK-SAME: (%[[X:.*]]: tensor<?x384xf32>)
// CHECK: %[[A:.*]] = sd.reshard %[[X]] sharding = <@mesh, [{"data"}, {"fsdp"}]> : tensor<?x384xf32>
// CHECK: sd.reshard %[[A]] sharding = <@mesh, [{}, {}], replicated = ["fsdp"]> : tensor<?x384xf32>
sd.mesh @mesh = <["data"=2, "fsdp"=4]>
func.func @reshard(%x: tensor<?x384xf32>) -> tensor<?x384xf32> {
  %a = sd.reshard %x sharding = <@mesh, [{"data"}, {"fsdp"}]> : tensor<?x384xf32>
  %b = sd.reshard %a sharding = <@mesh, [{}, {}], replicated = ["fsdp"]> : tensor<?x384xf32>
  return %b : tensor<?x384xf32>
}

// -----

// axis_index: the device's block index along axes, for iota and rng.
// CHECK-LABEL: func.func @axis_index
// CHECK: sd.axis_index @mesh axes = ["data", "fsdp"] : tensor<f32>
sd.mesh @mesh = <["data"=2, "fsdp"=4]>
func.func @axis_index() -> tensor<f32> {
  %i = sd.axis_index @mesh axes = ["data", "fsdp"] : tensor<f32>
  return %i : tensor<f32>
}
