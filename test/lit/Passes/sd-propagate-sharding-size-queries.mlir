// RUN: sdopt %s -sd-propagate-sharding="record-size-queries" | FileCheck %s
// RUN: sdopt %s -sd-propagate-sharding | FileCheck %s --check-prefix=OFF

// With record-size-queries the function gets the comparisons of the mesh's
// axis sizes the propagation made (what the planner reuses a propagation
// by): each is the query (bits 0-1: 0 divides, 1 fits in, 2 fills), the
// set of axes (bits 2-17: 1 "data", 2 "fsdp") and the factor size (above).
// Here: the empty set fills 8, 16 and 32 (the `full` tests of the factors
// i, j and k); "data" divides, fits in and fills i = 8 (2097156, 2097157,
// 2097158); "fsdp" the same for j = 16.

// CHECK-LABEL: func.func @steps
// CHECK-SAME:  sd.size_queries = array<i64: 2097154, 2097156, 2097157, 2097158, 4194306, 4194312, 4194313, 4194314, 8388610>
// OFF-NOT:     sd.size_queries

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @steps(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {?}]>},
                 %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) -> tensor<8x32xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %y = sd.dot_general %e, %w batch = [] x [] contract = [1] x [0] {sd.name = "proj"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
