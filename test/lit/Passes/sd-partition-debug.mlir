// RUN: sdopt %s -sd-partition -debug-only=sd-partition,sd-reshard -mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s
// RUN: sdopt %s -sd-partition -debug-only=sd-reshard -mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=RESHARD

// -debug-only=sd-partition shows each argument's and op result's local
// type and each reshard with the collectives it becomes; sd-reshard adds
// the reshard planner's problem and the plan it found. Each type prints
// only its own lines.

// CHECK:      [sd-partition] partitioning @steps over @mesh
// CHECK-NEXT: [sd-partition] argument #0 ("x.weight"): tensor<8x16xf32> -> tensor<2x16xf32> as #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>
// CHECK-NEXT: [sd-partition] argument #1: tensor<16x32xf32> -> tensor<8x32xf32> as #sd.sharding<@mesh, [{"fsdp"}, {}]>
// CHECK-NEXT: [sd-reshard] tensor [16, 32] from [{fsdp}, {}] to [{}, {}]
// CHECK-NEXT: [sd-reshard] plan after 2 layouts: all_gather [{fsdp}, {}], 1024 bytes sent per device
// CHECK-NEXT: [sd-partition] reshard argument #1 from #sd.sharding<@mesh, [{"fsdp"}, {}]> to #sd.sharding<@mesh, [{}, {}]>: all_gather [{fsdp}, {}]
// CHECK-NEXT: [sd-partition] partitioned result #0 of sd.dot_general "proj": tensor<8x32xf32> -> tensor<2x32xf32> as #sd.sharding<@mesh, [{"data", "fsdp", ?}, {?}]>
// CHECK-NEXT: [sd-partition] partitioned result #0 of sd.reduce_mean: tensor<8xf32> -> tensor<2xf32> as #sd.sharding<@mesh, [{"data", "fsdp"}]>
// CHECK-NOT:  [sd-

// RESHARD-NOT: [sd-partition]
// RESHARD:     [sd-reshard] tensor [16, 32] from [{fsdp}, {}] to [{}, {}]
// RESHARD-NOT: [sd-partition]

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @steps(%x: tensor<8x16xf32> {sd.role = #sd.param<"x.weight", zeros>, sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>},
                 %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>})
    -> (tensor<8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}]>}) {
  %r = sd.reshard %w sharding = <@mesh, [{}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<16x32xf32>
  %y = sd.dot_general %x, %r batch = [] x [] contract = [1] x [0] {sd.name = "proj", sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", "fsdp", ?}, {?}]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %m = sd.reduce_mean %y dims = [1] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", "fsdp"}]>]>} : (tensor<8x32xf32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}
