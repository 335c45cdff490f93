// RUN: sdopt %s -split-input-file -sd-partition | FileCheck %s

// Uneven shards: a dimension its devices do not divide is padded to a
// multiple, each device holding ceil(size / devices) (6 over 4: blocks of
// 2, the last one empty). The boundary keeps the global shape beside the
// local sharding.

// Elementwise ops run on the padded blocks as they are.
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @padded_elementwise
// CHECK-SAME: %[[X:.*]]: tensor<2x16xf32> {sd.global_shape = array<i64: 6, 16>, sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>}
// CHECK-SAME: -> (tensor<2x16xf32> {sd.global_shape = array<i64: 6, 16>, sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
// CHECK-NEXT: %[[Y:.*]] = sd.exp %[[X]] : tensor<2x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @padded_elementwise(%x: tensor<6x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<6x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) {
  %y = sd.exp %x {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

// A sum over a padded dimension zeroes the padding first: the rows at
// global index 6 and beyond (index < 6 - block * 2).
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @padded_sum
// CHECK-SAME: %[[X:.*]]: tensor<2x16xf32>
// CHECK: %[[BLOCK:.*]] = sd.axis_index @mesh axes = ["data"] : tensor<f32>
// CHECK: %[[START:.*]] = sd.mul %[[BLOCK]], %{{.*}} : tensor<f32>
// CHECK: %[[VALID:.*]] = sd.sub %{{.*}}, %[[START]] : tensor<f32>
// CHECK: %[[ROW:.*]] = sd.iota dim = 0 : tensor<2x16xf32>
// CHECK: %[[BOUND:.*]] = sd.broadcast_in_dim %[[VALID]]
// CHECK: %[[KEEP:.*]] = sd.compare {{ *}}lt, %[[ROW]], %[[BOUND]] : tensor<2x16xf32>
// CHECK: %[[MASKED:.*]] = sd.select %[[KEEP]], %[[X]], %{{.*}} : tensor<2x16xi1>, tensor<2x16xf32>
// CHECK: %[[SUM:.*]] = sd.reduce_sum %[[MASKED]] dims = [0] : (tensor<2x16xf32>) -> tensor<16xf32>
// CHECK: sd.all_reduce %[[SUM]] @mesh axes = ["data"]
func.func @padded_sum(%x: tensor<6x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<16xf32> {sd.sharding = #sd.sharding<@mesh, [{}]>}) {
  %s = sd.reduce_sum %x dims = [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}], unreduced = ["data"]>]>} : (tensor<6x16xf32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

// A mean over a padded dimension: the local mean over the block's 2 rows
// times 2/6 (the block's share of the global count), not 1/4.
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @padded_mean
// CHECK: sd.select
// CHECK: %[[MEAN:.*]] = sd.reduce_mean %{{.*}} dims = [0] : (tensor<2x16xf32>) -> tensor<16xf32>
// CHECK: %[[SHARE:.*]] = sd.constant dense<0.333333343> : tensor<16xf32>
// CHECK: sd.mul %[[MEAN]], %[[SHARE]]
func.func @padded_mean(%x: tensor<6x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<16xf32> {sd.sharding = #sd.sharding<@mesh, [{}]>}) {
  %m = sd.reduce_mean %x dims = [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}], unreduced = ["data"]>]>} : (tensor<6x16xf32>) -> tensor<16xf32>
  return %m : tensor<16xf32>
}

// -----

// A contraction over a padded dimension masks both operands (the padding
// may hold anything, NaN included, which a zero times would keep).
sd.mesh @mesh = <["tensor"=3]>
// CHECK-LABEL: func.func @padded_contraction
// CHECK-SAME: %[[X:.*]]: tensor<8x4xf32>
// CHECK-SAME: %[[W:.*]]: tensor<4x16xf32>
// CHECK: %[[MX:.*]] = sd.select %{{.*}}, %[[X]], %{{.*}} : tensor<8x4xi1>, tensor<8x4xf32>
// CHECK: %[[MW:.*]] = sd.select %{{.*}}, %[[W]], %{{.*}} : tensor<4x16xi1>, tensor<4x16xf32>
// CHECK: sd.dot_general %[[MX]], %[[MW]]
func.func @padded_contraction(%x: tensor<8x10xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>},
                              %w: tensor<10x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>})
    -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>}) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {}], unreduced = ["tensor"]>]>} : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A padded dimension whose layout changes goes through whole: gathered
// (4 x 3 = 12 rows) and cut to its 10, then padded to 3 x 4 = 12 and
// sliced for the new axis.
sd.mesh @mesh = <["data"=4, "tensor"=3]>
// CHECK-LABEL: func.func @padded_reshard
// CHECK-SAME: %[[X:.*]]: tensor<3x8xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[X]] @mesh [{"data"}, {}] : (tensor<3x8xf32>) -> tensor<12x8xf32>
// CHECK-NEXT: %[[W:.*]] = sd.slice %[[G]] start = [0, 0] limit = [10, 8] strides = [1, 1] : (tensor<12x8xf32>) -> tensor<10x8xf32>
// CHECK-NEXT: %[[P:.*]] = sd.pad %[[W]] low = [0, 0] high = [2, 0] : (tensor<10x8xf32>) -> tensor<12x8xf32>
// CHECK-NEXT: %[[S:.*]] = sd.all_slice %[[P]] @mesh [{"tensor"}, {}] : (tensor<12x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[S]]
func.func @padded_reshard(%x: tensor<10x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<10x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}) {
  return %x : tensor<10x8xf32>
}

// -----

// A padded dimension that keeps its layout moves as it is while the others
// change (the planner sees its padded size).
sd.mesh @mesh = <["data"=3, "tensor"=2]>
// CHECK-LABEL: func.func @padded_kept
// CHECK-SAME: %[[X:.*]]: tensor<3x4xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[X]] @mesh [{}, {"tensor"}] : (tensor<3x4xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @padded_kept(%x: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>})
    -> (tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) {
  return %x : tensor<8x8xf32>
}

// -----

// A constant that is not a splat is padded to whole blocks, then sliced.
sd.mesh @mesh = <["data"=2]>
// CHECK-LABEL: func.func @padded_constant
// CHECK: %[[C:.*]] = sd.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK: %[[P:.*]] = sd.pad %[[C]] low = [0] high = [1] : (tensor<3xf32>) -> tensor<4xf32>
// CHECK: sd.all_slice %[[P]] @mesh [{"data"}] : (tensor<4xf32>) -> tensor<2xf32>
func.func @padded_constant() -> (tensor<3xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) {
  %c = sd.constant {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}]>]>} dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  return %c : tensor<3xf32>
}
