// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-partition | FileCheck %s

// Reshards that only move whole blocks between devices become one
// sd.collective_permute: within each group of devices that differ on
// `axes`, member s sends its block to member t for each pair [s, t] (member
// = row-major index over `axes`, in mesh order); members no pair targets
// keep their block. Each device sends its local block L at most once, where
// a gather and a slice would send L·(N-1).

// A value sharded on data consumed where fsdp is required: the device at
// (data d, fsdp f) holds block d and needs block f, so members 1 (0, 1)
// and 2 (1, 0) swap; 0 and 3 keep theirs.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @data_to_fsdp
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x16xf32>
// CHECK-NEXT: %[[E:.*]] = sd.exp %[[X]] : tensor<4x16xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[E]] @mesh axes = ["data", "fsdp"] pairs = {{\[}}[1, 2], [2, 1]] : tensor<4x16xf32>
// CHECK-NEXT: %[[S:.*]] = sd.sin %[[P]] : tensor<4x16xf32>
// CHECK-NEXT: return %[[S]]
func.func @data_to_fsdp(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) {
  %e = sd.exp %x {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<8x16xf32>
  %r = sd.reshard %e sharding = <@mesh, [{"fsdp"}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp"}, {}]>]>} : tensor<8x16xf32>
  %y = sd.sin %r {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp"}, {}]>]>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A dimension's axes change order, [data, fsdp] -> [fsdp, data] on
// data=2, fsdp=4: member 4d + f holds block 4d + f and needs block 2f + d.
// Members 0 and 7 keep theirs.
sd.mesh @mesh = <["data"=2, "fsdp"=4]>
// CHECK-LABEL: func.func @swap_axis_order
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x16xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[X]] @mesh axes = ["data", "fsdp"] pairs = {{\[}}[1, 4], [2, 1], [3, 5], [4, 2], [5, 6], [6, 3]] : tensor<2x16xf32>
// CHECK-NEXT: return %[[P]]
func.func @swap_axis_order(%x: tensor<16x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>})
    -> (tensor<16x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp", "data"}, {}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"fsdp", "data"}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", "data"}, {}]>]>} : tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// Two dimensions trade axes: data and fsdp swap places; tensor, minor in
// dimension 0 in both layouts, gives every block the same offset and stays
// out of the groups.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @trade_dimensions
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[X]] @mesh axes = ["data", "fsdp"] pairs = {{\[}}[1, 2], [2, 1]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[P]]
func.func @trade_dimensions(%x: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "tensor"}, {"fsdp"}]>})
    -> (tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp", "tensor"}, {"data"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"fsdp", "tensor"}, {"data"}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", "tensor"}, {"data"}]>]>} : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// [data, fsdp] -> [fsdp]: permute to [fsdp, data] (L), then gather data
// (L), where gathering fsdp first and permuting data to fsdp sends 3 L.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @permute_then_gather
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x16xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[X]] @mesh axes = ["data", "fsdp"] pairs = {{\[}}[1, 2], [2, 1]] : tensor<2x16xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[P]] @mesh [{"data"}, {}] : (tensor<2x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[G]]
func.func @permute_then_gather(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>})
    -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"fsdp"}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp"}, {}]>]>} : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// A partial sum stays one: the permute moves the unreduced blocks as they
// are (tensor is not in the groups).
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @partial_sum_kept
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x16xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[X]] @mesh axes = ["data", "fsdp"] pairs = {{\[}}[1, 2], [2, 1]] : tensor<4x16xf32>
// CHECK-NEXT: return %[[P]]
func.func @partial_sum_kept(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], unreduced = ["tensor"]>})
    -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}], unreduced = ["tensor"]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"fsdp"}, {}], unreduced = ["tensor"]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp"}, {}], unreduced = ["tensor"]>]>} : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Reordering around a size-1 axis moves no block: no collective at all
// (a gather of data and a slice would send L).
sd.mesh @mesh = <["data"=2, "unit"=1]>
// CHECK-LABEL: func.func @unit_axis_reordered
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x16xf32>
// CHECK-NEXT: return %[[X]]
func.func @unit_axis_reordered(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "unit"}, {}]>})
    -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"unit", "data"}, {}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"unit", "data"}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"unit", "data"}, {}]>]>} : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
