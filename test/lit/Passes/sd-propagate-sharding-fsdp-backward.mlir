// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-propagate-sharding | FileCheck %s
// Propagating again changes nothing: the partial sums and reshards of the
// first run are annotations of the second.
// RUN: sdopt %s -split-input-file -sd-propagate-sharding -sd-propagate-sharding | FileCheck %s

// The weight gradient of an FSDP linear layer: dW = x^T dy contracts the
// batch, which both activations hold on fsdp, and the update gives dW the
// parameter's fsdp sharding. The large activations stay where they are:
// dW is a partial sum over fsdp, reduced (a reduce-scatter) to the
// parameter's sharding after the dot.
sd.mesh @mesh = <["fsdp"=2]>
// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16x32xf32>
// CHECK-SAME: %[[DY:[^:]*]]: tensor<8x16x64xf32>
// CHECK-NOT: sd.reshard
// CHECK: %[[DW:.*]] = sd.dot_general %[[X]], %[[DY]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{?}, {?}], unreduced = ["fsdp"]>]>
// CHECK: %[[R:.*]] = sd.reshard %[[DW]] sharding = <@mesh, [{"fsdp"}, {}]> {sd.backward
// CHECK: sd.sub %{{.*}}, %[[R]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {?}]>]>
func.func @weight_gradient(%x: tensor<8x16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}, {}]>},
                           %dy: tensor<8x16x64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}, {}]>},
                           %w: tensor<32x64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>})
    -> (tensor<32x64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) {
  %dw = sd.dot_general %x, %dy batch = [] x [] contract = [0, 1] x [0, 1] {sd.backward} : (tensor<8x16x32xf32>, tensor<8x16x64xf32>) -> tensor<32x64xf32>
  %new = sd.sub %w, %dw {sd.backward} : tensor<32x64xf32>
  return %new : tensor<32x64xf32>
}

// -----

// The input gradient dx = dy W^T: the batch-sharded dy stays, and the
// parameter is gathered.
sd.mesh @mesh = <["fsdp"=2]>
// CHECK-LABEL: func.func @input_gradient
// CHECK-SAME: %[[DY:[^:]*]]: tensor<8x16x64xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<32x64xf32>
// CHECK: %[[R:.*]] = sd.reshard %[[W]] sharding = <@mesh, [{}, {}]>
// CHECK: sd.dot_general %[[DY]], %[[R]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {?}, {?}]>]>
func.func @input_gradient(%dy: tensor<8x16x64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}, {}]>},
                          %w: tensor<32x64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) -> tensor<8x16x32xf32> {
  %dx = sd.dot_general %dy, %w batch = [] x [] contract = [2] x [1] {sd.backward} : (tensor<8x16x64xf32>, tensor<32x64xf32>) -> tensor<8x16x32xf32>
  return %dx : tensor<8x16x32xf32>
}

// -----

// The forward dot contracts the weight's fsdp dimension, but the weight is
// smaller than the batch-sharded activation and result: the result keeps
// its batch sharding and the weight is gathered, not the activation.
sd.mesh @mesh = <["fsdp"=2]>
// CHECK-LABEL: func.func @forward_gathers_weight
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16x32xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<32x64xf32>
// CHECK: %[[R:.*]] = sd.reshard %[[W]] sharding = <@mesh, [{}, {}]>
// CHECK: sd.dot_general %[[X]], %[[R]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {?}, {?}]>]>
func.func @forward_gathers_weight(%x: tensor<8x16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}, {}]>},
                                  %w: tensor<32x64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) -> tensor<8x16x64xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>
  return %y : tensor<8x16x64xf32>
}
