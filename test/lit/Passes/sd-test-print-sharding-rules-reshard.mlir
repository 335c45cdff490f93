// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-test-print-sharding-rules | FileCheck %s

// sd.reshard is numerically the identity: its rule is the elementwise one,
// one pass-through factor per dimension shared by operand and result, so
// propagation passes shardings through it (the reshard itself states the
// result's sharding).

// CHECK-LABEL: func.func @reshard(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: sd.reshard %[[X]] sharding = <@mesh, [{"data"}, {}, {"fsdp"}]> {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([i, j, k]) {i=2, j=4, k=8}>}
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reshard(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = sd.reshard %x sharding = <@mesh, [{"data"}, {}, {"fsdp"}]> : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// A scalar has no factors.
// CHECK-LABEL: func.func @reshard_scalar(
// CHECK: sd.reshard %{{.*}} sharding = <@mesh, []> {sd.sharding_rule = #sd.sharding_rule<([]) -> ([]) {}>}
sd.mesh @mesh = <["data"=2]>
func.func @reshard_scalar(%x: tensor<f32>) -> tensor<f32> {
  %y = sd.reshard %x sharding = <@mesh, []> : tensor<f32>
  return %y : tensor<f32>
}

// -----

// A dynamic batch has no rule yet: the rule needs static sizes.
sd.mesh @mesh = <["data"=2]>
func.func @reshard_dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'sd.reshard' op has no sharding rule while operand #0 has type 'tensor<?x4xf32>'; shapes must be static and non-empty (run sd-specialize-batch first)}}
  %y = sd.reshard %x sharding = <@mesh, [{"data"}, {}]> : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
