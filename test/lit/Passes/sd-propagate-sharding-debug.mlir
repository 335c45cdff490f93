// RUN: sdopt %s -sd-propagate-sharding -debug-only=sd-propagate -mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s

// -debug-only=sd-propagate shows each step of propagation: the user
// priority and the op-priority phase, every value an op gives a sharding
// (with the factors and the values their axes come from, or the partial
// sum a reduction factor leaves), and every reshard inserted. Values are
// named as in the printed function.

// CHECK:      [sd-propagate] propagating over @steps
// CHECK-NEXT: [sd-propagate] user priority none (unprioritized annotations)
// CHECK-NEXT: [sd-propagate] phase: pass-through ops
// CHECK-NEXT: [sd-propagate] %0 = sd.exp sets %0 to [{"data", ?}, {?}] (factor i from %arg0)
// CHECK-NEXT: [sd-propagate] phase: pass-through factors
// CHECK-NEXT: [sd-propagate] %1 = sd.dot_general "proj" sets %1 to [{"data", ?}, {?}] (factor i from %0)
// CHECK-NEXT: [sd-propagate] return #0 of @steps sets result #0 of @steps to [{"data", ?}, {?}] (factor i from %1)
// CHECK-NEXT: [sd-propagate] phase: all factors
// CHECK-NEXT: [sd-propagate] %1 = sd.dot_general "proj" sets %0 to [{"data", ?}, {"fsdp", ?}] (factor j from %arg1)
// CHECK-NEXT: [sd-propagate] %1 = sd.dot_general "proj" sets %1 to [{"data", ?}, {?}], unreduced = ["fsdp"] (partial sum)
// CHECK-NEXT: [sd-propagate] %0 = sd.exp sets %arg0 to [{"data"}, {"fsdp", ?}] (factor j from %0)
// CHECK-NEXT: [sd-propagate] reshard %1 for operand #0 of return #0 of @steps to #sd.sharding<@mesh, [{"data"}, {}]>
// CHECK-NOT:  [sd-propagate]

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @steps(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {?}]>},
                 %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) -> tensor<8x32xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %y = sd.dot_general %e, %w batch = [] x [] contract = [1] x [0] {sd.name = "proj"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
