// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-lower-to-openmp | FileCheck %s
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-lower-to-openmp="fusion=false" | FileCheck %s --check-prefix=NOFUSE

// An elementwise chain is one kernel, rooted at its last op.
// CHECK-LABEL: func.func @chain
// CHECK: sd.exp %{{.*}} {sd.kernel = "k0"}
// CHECK-NEXT: sd.mul %{{.*}} {sd.kernel = "k0"}
// CHECK-NEXT: sd.tanh %{{.*}} {sd.kernel = "k0", sd.kernel_kind = "fused"}
// Without fusion every op is its own kernel.
// NOFUSE-LABEL: func.func @chain
// NOFUSE: sd.exp %{{.*}} {sd.kernel = "k0", sd.kernel_kind = "fused"}
// NOFUSE-NEXT: sd.mul %{{.*}} {sd.kernel = "k1", sd.kernel_kind = "fused"}
// NOFUSE-NEXT: sd.tanh %{{.*}} {sd.kernel = "k2", sd.kernel_kind = "fused"}
func.func @chain(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %m = sd.mul %e, %y : tensor<8x16xf32>
  %t = sd.tanh %m : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// A value two kernels read is materialized once; a splat constant is
// recomputed where it is read.
// CHECK-LABEL: func.func @multi_use
// CHECK: sd.exp %{{.*}} {sd.kernel = "k0", sd.kernel_kind = "fused"}
// CHECK-NEXT: sd.neg %{{.*}} {sd.kernel = "k1", sd.kernel_kind = "fused"}
// CHECK-NEXT: sd.sqrt %{{.*}} {sd.kernel = "k2"}
// CHECK-NEXT: sd.constant {sd.kernel = "inline"}
// CHECK-NEXT: sd.mul %{{.*}} {sd.kernel = "k2", sd.kernel_kind = "fused"}
func.func @multi_use(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %e = sd.exp %x : tensor<8x16xf32>
  %a = sd.neg %e : tensor<8x16xf32>
  %b = sd.sqrt %e : tensor<8x16xf32>
  %c = sd.constant dense<2.0> : tensor<8x16xf32>
  %d = sd.mul %b, %c : tensor<8x16xf32>
  return %a, %d : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A reduction fuses its elementwise producers (and a broadcast) into its
// input; a broadcast several kernels read is recomputed by each.
// CHECK-LABEL: func.func @reduce_fuses_producers
// CHECK: sd.broadcast_in_dim %{{.*}} {sd.kernel = "inline"}
// CHECK-NEXT: sd.mul %{{.*}} {sd.kernel = "k0"}
// CHECK-NEXT: sd.reduce_sum %{{.*}} {sd.kernel = "k0", sd.kernel_kind = "reduce"}
// CHECK-NEXT: sd.add %{{.*}} {sd.kernel = "k1", sd.kernel_kind = "fused"}
func.func @reduce_fuses_producers(%x: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<8xf32>, tensor<8x16xf32>) {
  %bb = sd.broadcast_in_dim %b dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  %m = sd.mul %x, %bb : tensor<8x16xf32>
  %s = sd.reduce_sum %m dims = [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %a = sd.add %x, %bb : tensor<8x16xf32>
  return %s, %a : tensor<8xf32>, tensor<8x16xf32>
}

// -----

// Library calls read materialized operands; a reshape of a materialized
// value aliases its buffer.
// CHECK-LABEL: func.func @library_calls
// CHECK: sd.reshape %{{.*}} {sd.kernel = "k0", sd.kernel_kind = "alias"}
// CHECK-NEXT: sd.reshape %{{.*}} {sd.kernel = "k1", sd.kernel_kind = "alias"}
// CHECK-NEXT: sd.dot_general {{.*}} {sd.kernel = "k2", sd.kernel_kind = "gemm"}
// CHECK-NEXT: sd.gelu %{{.*}} {sd.kernel = "k3", sd.kernel_kind = "fused"}
// CHECK-NEXT: sd.transpose {{.*}} {sd.kernel = "k4", sd.kernel_kind = "transpose"}
// CHECK-NEXT: sd.softmax {{.*}} {sd.kernel = "k5", sd.kernel_kind = "softmax"}
func.func @library_calls(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<4x8xf32>) {
  %r = sd.reshape %x : (tensor<8x16xf32>) -> tensor<128xf32>
  %r2 = sd.reshape %r : (tensor<128xf32>) -> tensor<8x16xf32>
  %y = sd.dot_general %r2, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %g = sd.gelu %y : tensor<8x4xf32>
  %t = sd.transpose %g permutation = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %s = sd.softmax %t dim = 1 : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Collectives, offload and reload are steps of their own.
sd.mesh @mesh = <["data"=2]>
// CHECK-LABEL: func.func @collectives_and_moves
// CHECK: sd.all_reduce {{.*}} {sd.kernel = "k0", sd.kernel_kind = "collective"}
// CHECK-NEXT: sd.offload {{.*}} {sd.kernel = "k1", sd.kernel_kind = "offload"}
// CHECK-NEXT: sd.reload {{.*}} {sd.kernel = "k2", sd.kernel_kind = "reload"}
// CHECK-NEXT: sd.axis_index {{.*}} {sd.kernel = "k3", sd.kernel_kind = "axis_index"}
func.func @collectives_and_moves(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %r = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x8xf32>
  %h = sd.offload %r : tensor<4x8xf32>
  %d = sd.reload %h : tensor<4x8xf32>
  %i = sd.axis_index @mesh axes = ["data"] : tensor<f32>
  return %d, %i : tensor<4x8xf32>, tensor<f32>
}
