// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-partition | FileCheck %s

// Hand-propagated global programs (as sd-propagate-sharding leaves them)
// and their per-device forms: local types, the collectives of each reshard,
// and the ops that partition themselves. The global layouts stay on the
// function boundary as sd.local_sharding; ops lose sd.sharding.

// Data parallelism: the batch passes through the dot, the weight is
// replicated; no collective.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @data_parallel_dot
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>}
// CHECK-SAME: %[[W:.*]]: tensor<16x32xf32> {sd.local_sharding = #sd.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: -> (tensor<4x32xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
// CHECK-NEXT: %[[Y:.*]] = sd.dot_general %[[X]], %[[W]] batch = [] x [] contract = [1] x [0] : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @data_parallel_dot(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                             %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>}) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// FSDP: the parameter sharded over fsdp is gathered before its use.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @fsdp_gather
// CHECK-SAME: %[[X:.*]]: tensor<2x16xf32>
// CHECK-SAME: %[[W:.*]]: tensor<8x32xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[W]] @mesh [{"fsdp"}, {}] : (tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: sd.dot_general %[[X]], %[[G]] {{.*}} : (tensor<2x16xf32>, tensor<16x32xf32>) -> tensor<2x32xf32>
// CHECK-NOT: sd.all_
func.func @fsdp_gather(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>},
                       %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>})
    -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp", ?}, {?}]>}) {
  %r = sd.reshard %w sharding = <@mesh, [{}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<16x32xf32>
  %y = sd.dot_general %x, %r batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", "fsdp", ?}, {?}]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// all_slice: a replicated value resharded onto an axis keeps its block.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @slice
// CHECK-SAME: -> (tensor<8x8xf32> {sd.local_sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>})
// CHECK-NEXT: %[[S:.*]] = sd.all_slice %{{.*}} @mesh [{}, {"tensor"}] : (tensor<8x16xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[S]]
func.func @slice(%x: tensor<8x16xf32>) -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{}, {"tensor"}]> : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// all_to_all: an axis moves between dimensions (Ulysses).
sd.mesh @mesh = <["data"=2, "context"=2]>
// CHECK-LABEL: func.func @all_to_all
// CHECK-NEXT: %[[A:.*]] = sd.all_to_all %{{.*}} @mesh axes = ["context"] src_dim = 1 tgt_dim = 2 : (tensor<4x8x4xf32>) -> tensor<4x16x2xf32>
// CHECK-NEXT: return %[[A]]
func.func @all_to_all(%x: tensor<8x16x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"context"}, {}]>})
    -> (tensor<8x16x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {"context"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"data"}, {}, {"context"}]> : tensor<8x16x4xf32>
  return %r : tensor<8x16x4xf32>
}

// -----

// Four axes at once: two move together, and tensor takes data's place,
// the devices at (data 0, tensor 1) and (data 1, tensor 0) swapping blocks
// (128 B each, as a gather of data then a slice of tensor would send, in
// one op instead of two).
sd.mesh @mesh = <["data"=2, "fsdp"=2, "context"=2, "tensor"=2]>
// CHECK-LABEL: func.func @four_axes
// CHECK-NEXT: %[[A:.*]] = sd.all_to_all %{{.*}} @mesh axes = ["fsdp", "context"] src_dim = 0 tgt_dim = 1 : (tensor<2x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[A]] @mesh axes = ["data", "tensor"] pairs = {{\[}}[1, 2], [2, 1]] : tensor<8x4xf32>
// CHECK-NEXT: return %[[P]]
func.func @four_axes(%x: tensor<16x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp", "context"}, {}], replicated = ["tensor"]>})
    -> (tensor<16x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {"fsdp", "context"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"tensor"}, {"fsdp", "context"}]> : tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// A partial sum resolved onto a dimension: reduce_scatter.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME: tensor<16x32xf32> {sd.local_sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["fsdp"]>}
// CHECK-NEXT: %[[R:.*]] = sd.reduce_scatter %{{.*}} @mesh [{"fsdp"}, {}] : (tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: return %[[R]]
func.func @reduce_scatter(%g: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["fsdp"]>})
    -> (tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) {
  %r = sd.reshard %g sharding = <@mesh, [{"fsdp"}, {}]> : tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

// reduce_mean over a sharded dimension: the local mean divided by the
// shard count is a partial sum, all-reduced where it is used.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @reduce_mean
// CHECK-NEXT: %[[M:.*]] = sd.reduce_mean %{{.*}} dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[HALF:.*]] = sd.constant dense<5.000000e-01> : tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = sd.mul %[[M]], %[[HALF]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = sd.all_reduce %[[P]] @mesh axes = ["tensor"] : tensor<4xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[S]] @mesh [{"data"}] : (tensor<4xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @reduce_mean(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) -> tensor<8xf32> {
  %m = sd.reduce_mean %x dims = [1] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}], unreduced = ["tensor"]>]>} : (tensor<8x16xf32>) -> tensor<8xf32>
  %r = sd.reshard %m sharding = <@mesh, [{}]> : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// mse_loss: the local sum of squares over the global element count.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @mse_loss
// CHECK-NEXT: %[[L:.*]] = sd.mse_loss %{{.*}}, %{{.*}} : tensor<2x16xf32>
// CHECK-NEXT: %[[Q:.*]] = sd.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: %[[P:.*]] = sd.mul %[[L]], %[[Q]] : tensor<f32>
// CHECK-NEXT: %[[S:.*]] = sd.all_reduce %[[P]] @mesh axes = ["data", "fsdp"] : tensor<f32>
// CHECK-NEXT: return %[[S]]
func.func @mse_loss(%p: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>},
                    %t: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>}) -> tensor<f32> {
  %l = sd.mse_loss %p, %t {sd.sharding = #sd.sharding_per_value<[<@mesh, [], unreduced = ["data", "fsdp"]>]>} : tensor<8x16xf32>
  %r = sd.reshard %l sharding = <@mesh, []> : tensor<f32>
  return %r : tensor<f32>
}

// -----

// iota along a sharded dimension: the local indices plus the block offset.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @iota
// CHECK-NEXT: %[[I:.*]] = sd.iota dim = 0 : tensor<4x8xf32>
// CHECK-NEXT: %[[IDX:.*]] = sd.axis_index @mesh axes = ["data"] : tensor<f32>
// CHECK-NEXT: %[[SIZE:.*]] = sd.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[OFF:.*]] = sd.mul %[[IDX]], %[[SIZE]] : tensor<f32>
// CHECK-NEXT: %[[B:.*]] = sd.broadcast_in_dim %[[OFF]] dims = [] : (tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[G:.*]] = sd.add %[[I]], %[[B]] : tensor<4x8xf32>
// CHECK-NEXT: sd.add %{{.*}}, %[[G]] : tensor<4x8xf32>
func.func @iota(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) {
  %i = sd.iota dim = 0 {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>} : tensor<8x16xf32>
  %y = sd.add %x, %i {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// rng: the offsets form makes each device's block of the global tensor.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @rng
// CHECK-NEXT: %[[D:.*]] = sd.axis_index @mesh axes = ["data"] : tensor<f32>
// CHECK-NEXT: %[[DS:.*]] = sd.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DO:.*]] = sd.mul %[[D]], %[[DS]] : tensor<f32>
// CHECK-NEXT: %[[T:.*]] = sd.axis_index @mesh axes = ["tensor"] : tensor<f32>
// CHECK-NEXT: %[[TS:.*]] = sd.constant dense<8.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[TO:.*]] = sd.mul %[[T]], %[[TS]] : tensor<f32>
// CHECK-NEXT: sd.rng_uniform seed = 4 offsets(%[[DO]], %[[TO]]) global_shape = [8, 16] : tensor<4x8xf32>
func.func @rng(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) {
  %r = sd.rng_uniform seed = 4 {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>} : tensor<8x16xf32>
  %y = sd.add %x, %r {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Constants: a splat becomes the local splat; another is sliced.
sd.mesh @mesh = <["data"=2]>
// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %[[S:.*]] = sd.constant dense<2.000000e+00> : tensor<2xf32>
// CHECK-NEXT: %[[C:.*]] = sd.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = sd.all_slice %[[C]] @mesh [{"data"}] : (tensor<4xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[M:.*]] = sd.mul %{{.*}}, %[[S]] : tensor<2xf32>
// CHECK-NEXT: sd.add %[[M]], %[[B]] : tensor<2xf32>
func.func @constants(%x: tensor<4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) -> (tensor<4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) {
  %s = sd.constant {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}]>]>} dense<2.0> : tensor<4xf32>
  %c = sd.constant {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}]>]>} dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = sd.mul %x, %s {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}]>]>} : tensor<4xf32>
  %y = sd.add %a, %c {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}]>]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A sharding constraint ends at partitioning; names stay.
sd.mesh @mesh = <["data"=2]>
// CHECK-LABEL: func.func @constraint
// CHECK-SAME: %[[X:[^:]*]]: tensor<2xf32>
// CHECK-NEXT: %[[E:.*]] = sd.exp %[[X]] {sd.name = "hidden_states"} : tensor<2xf32>
// CHECK-NEXT: return %[[E]]
func.func @constraint(%x: tensor<4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) -> (tensor<4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) {
  %c = sd.sharding_constraint %x sharding = <@mesh, [{"data"}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}]>]>} : tensor<4xf32>
  %y = sd.exp %c {sd.name = "hidden_states", sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}]>]>} : tensor<4xf32>
  return %y : tensor<4xf32>
}
