// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-lower-to-openmp | FileCheck %s
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-lower-to-openmp="fusion=false" | FileCheck %s --check-prefix=NOFUSE

// An elementwise chain is one kernel, rooted at its last op.
// CHECK-LABEL: func.func @chain
// CHECK: %[[E:.*]] = sd.exp %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: %[[M:.*]] = sd.mul %[[E]], %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: %[[T:.*]] = sd.tanh %[[M]] {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NEXT: return %[[T]]
// Without fusion every op is its own kernel.
// NOFUSE-LABEL: func.func @chain
// NOFUSE: sd.exp %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>}
// NOFUSE-NEXT: sd.mul %{{.*}} {sd_omp.plan = #sd_omp.kernel<1, fused>}
// NOFUSE-NEXT: sd.tanh %{{.*}} {sd_omp.plan = #sd_omp.kernel<2, fused>}
func.func @chain(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %m = sd.mul %e, %y : tensor<8x16xf32>
  %t = sd.tanh %m : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// A value two kernels read is materialized once, by the first of them (a
// second output of its kernel); a splat constant is recomputed where it is
// read.
// CHECK-LABEL: func.func @multi_use
// CHECK: %[[E:.*]] = sd.exp %{{.*}} {sd_omp.plan = #sd_omp.kernel_output<0>}
// CHECK-NEXT: sd.neg %[[E]] {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NEXT: %[[S:.*]] = sd.sqrt %[[E]] {sd_omp.plan = #sd_omp.in_kernel<1>}
// CHECK-NEXT: %[[C:.*]] = sd.constant {sd_omp.plan = #sd_omp.inline}
// CHECK-NEXT: sd.mul %[[S]], %[[C]] {sd_omp.plan = #sd_omp.kernel<1, fused>}
func.func @multi_use(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %e = sd.exp %x : tensor<8x16xf32>
  %a = sd.neg %e : tensor<8x16xf32>
  %b = sd.sqrt %e : tensor<8x16xf32>
  %c = sd.constant dense<2.0> : tensor<8x16xf32>
  %d = sd.mul %b, %c : tensor<8x16xf32>
  return %a, %d : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Several users in one kernel: computed there, never materialized.
// CHECK-LABEL: func.func @users_in_one_kernel
// CHECK: sd.tanh %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: sd.add %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: sd.mul %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>}
func.func @users_in_one_kernel(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %t = sd.tanh %x : tensor<8x16xf32>
  %a = sd.add %t, %x : tensor<8x16xf32>
  %b = sd.mul %t, %a : tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}

// -----

// The input of a gelu that a GEMM reads later is stored by the gelu's
// kernel.
// CHECK-LABEL: func.func @output_before_library_reader
// CHECK: %[[S:.*]] = sd.add %{{.*}} {sd_omp.plan = #sd_omp.kernel_output<0>}
// CHECK-NEXT: sd.gelu %[[S]] {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NEXT: sd.dot_general %[[S]], {{.*}} {sd_omp.plan = #sd_omp.kernel<1, library>}
func.func @output_before_library_reader(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x16xf32>, tensor<8x4xf32>) {
  %s = sd.add %x, %x : tensor<8x16xf32>
  %g = sd.gelu %s : tensor<8x16xf32>
  %y = sd.dot_general %s, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %g, %y : tensor<8x16xf32>, tensor<8x4xf32>
}

// -----

// No extra output when another reader runs before the kernel (the
// reduction), or when the user's kernel loops over another shape (the
// broadcast's): the value has a kernel of its own.
// CHECK-LABEL: func.func @no_output
// CHECK: %[[E:.*]] = sd.exp %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NEXT: sd.reduce_sum %[[E]] {{.*}}{sd_omp.plan = #sd_omp.kernel<1, reduce>}
// CHECK-NEXT: sd.neg %[[E]] {sd_omp.plan = #sd_omp.kernel<2, fused>}
// CHECK: %[[F:.*]] = sd.exp %{{.*}} {sd_omp.plan = #sd_omp.kernel<3, fused>}
// CHECK-NEXT: sd.reshape %[[F]] {{.*}}{sd_omp.plan = #sd_omp.in_kernel<4>}
// CHECK-NEXT: sd.neg {{.*}}{sd_omp.plan = #sd_omp.kernel<4, fused>}
// CHECK-NEXT: sd.dot_general %[[F]]
func.func @no_output(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8xf32>, tensor<8x16xf32>, tensor<128xf32>, tensor<8x4xf32>) {
  %e = sd.exp %x : tensor<8x16xf32>
  %s = sd.reduce_sum %e dims = [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %n = sd.neg %e : tensor<8x16xf32>
  %f = sd.exp %x : tensor<8x16xf32>
  %r = sd.reshape %f : (tensor<8x16xf32>) -> tensor<128xf32>
  %m = sd.neg %r : tensor<128xf32>
  %y = sd.dot_general %f, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %s, %n, %m, %y : tensor<8xf32>, tensor<8x16xf32>, tensor<128xf32>, tensor<8x4xf32>
}

// -----

// A reduction fuses its elementwise producers (and a broadcast) into its
// input; a broadcast several kernels read is recomputed by each.
// CHECK-LABEL: func.func @reduce_fuses_producers
// CHECK: %[[B:.*]] = sd.broadcast_in_dim %{{.*}} {sd_omp.plan = #sd_omp.inline}
// CHECK-NEXT: %[[M:.*]] = sd.mul %{{.*}}, %[[B]] {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: sd.reduce_sum %[[M]] {{.*}}{sd_omp.plan = #sd_omp.kernel<0, reduce>}
// CHECK-NEXT: sd.add %{{.*}}, %[[B]] {sd_omp.plan = #sd_omp.kernel<1, fused>}
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
// CHECK: %[[R:.*]] = sd.reshape %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, alias>}
// CHECK-NEXT: %[[R2:.*]] = sd.reshape %[[R]] {sd_omp.plan = #sd_omp.kernel<1, alias>}
// CHECK-NEXT: %[[Y:.*]] = sd.dot_general %[[R2]], {{.*}} {sd_omp.plan = #sd_omp.kernel<2, library>}
// CHECK-NEXT: %[[G:.*]] = sd.gelu %[[Y]] {sd_omp.plan = #sd_omp.kernel<3, fused>}
// CHECK-NEXT: %[[T:.*]] = sd.transpose %[[G]] {{.*}} {sd_omp.plan = #sd_omp.kernel<4, library>}
// CHECK-NEXT: sd.softmax %[[T]] {{.*}} {sd_omp.plan = #sd_omp.kernel<5, library>}
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
// CHECK: %[[R:.*]] = sd.all_reduce {{.*}} {sd_omp.plan = #sd_omp.kernel<0, collective>}
// CHECK-NEXT: %[[H:.*]] = sd.offload %[[R]] {sd_omp.plan = #sd_omp.kernel<1, memory>}
// CHECK-NEXT: %[[D:.*]] = sd.reload %[[H]] {sd_omp.plan = #sd_omp.kernel<2, memory>}
// CHECK-NEXT: %[[I:.*]] = sd.axis_index {{.*}} {sd_omp.plan = #sd_omp.kernel<3, collective>}
// CHECK-NEXT: return %[[D]], %[[I]]
func.func @collectives_and_moves(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %r = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x8xf32>
  %h = sd.offload %r : tensor<4x8xf32>
  %d = sd.reload %h : tensor<4x8xf32>
  %i = sd.axis_index @mesh axes = ["data"] : tensor<f32>
  return %d, %i : tensor<4x8xf32>, tensor<f32>
}

// -----

// A non-splat constant is a static array; a splat read by a library call is
// materialized by a kernel of its own; iota is recomputed where read.
// CHECK-LABEL: func.func @constants_and_iota
// CHECK: %[[D:.*]] = sd.constant {sd_omp.plan = #sd_omp.kernel<0, constant>} dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK-NEXT: %[[S:.*]] = sd.constant {sd_omp.plan = #sd_omp.kernel<1, fused>} dense<1.000000e+00>
// CHECK-NEXT: %[[I:.*]] = sd.iota dim = 0 {sd_omp.plan = #sd_omp.inline}
// CHECK-NEXT: %[[A:.*]] = sd.add %[[D]], %[[I]] {sd_omp.plan = #sd_omp.kernel<2, fused>}
// CHECK-NEXT: sd.softmax %[[S]] {{.*}}{sd_omp.plan = #sd_omp.kernel<3, library>}
func.func @constants_and_iota() -> (tensor<4xf32>, tensor<4xf32>) {
  %d = sd.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %s = sd.constant dense<1.0> : tensor<4xf32>
  %i = sd.iota dim = 0 : tensor<4xf32>
  %a = sd.add %d, %i : tensor<4xf32>
  %m = sd.softmax %s dim = 0 : tensor<4xf32>
  return %a, %m : tensor<4xf32>, tensor<4xf32>
}

// -----

// sd.adamw is decomposed into its elementwise ops, which fuse into one
// kernel that stores the new moments as extra outputs; its scalars become
// splats of the parameter's type (constants) or broadcasts (values), and
// the scalar constants it read are gone.
// CHECK-LABEL: func.func @adamw
// CHECK-NOT: tensor<f32> {sd_omp
// CHECK: %[[M:.*]] = sd.add %{{.*}}, %{{.*}} {sd_omp.plan = #sd_omp.kernel_output<0>}
// CHECK: %[[V:.*]] = sd.add %{{.*}}, %{{.*}} {sd_omp.plan = #sd_omp.kernel_output<0>}
// CHECK: sd.broadcast_in_dim %{{.*}} dims = [] {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK: sd.sqrt %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK: %[[P:.*]] = sd.sub %{{.*}}, %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NOT: sd.adamw
// CHECK: return %[[P]], %[[M]], %[[V]]
func.func @adamw(%p: tensor<8x16xf32>, %g: tensor<8x16xf32>, %mu: tensor<8x16xf32>, %nu: tensor<8x16xf32>, %lr: tensor<f32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %c = sd.constant dense<0.9> : tensor<f32>
  %p1, %mu1, %nu1 = sd.adamw %p, %g, %mu, %nu lr = %lr corrections = (%lr, %lr) beta1 = (%c, %c) beta2 = (%c, %c) eps = %c weight_decay = %c : tensor<8x16xf32>
  return %p1, %mu1, %nu1 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A bf16 rounding of a small value that only wide broadcasts read (a bias
// cast from its f32 master) is a kernel of its own, computed once rather
// than once per element of the broadcast; a narrow broadcast (less than 16
// times the value) and a widening convert still fuse.
// CHECK-LABEL: func.func @rounding_before_broadcast
// CHECK: %[[B:.*]] = sd.convert %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>} : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: sd.broadcast_in_dim %[[B]] {{.*}}{sd_omp.plan = #sd_omp.in_kernel<1>}
// CHECK-NEXT: sd.add %{{.*}} {sd_omp.plan = #sd_omp.kernel<1, fused>}
// CHECK-NEXT: sd.convert %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<2>} : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: sd.broadcast_in_dim %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<2>}
// CHECK-NEXT: sd.add %{{.*}} {sd_omp.plan = #sd_omp.kernel<2, fused>}
// CHECK-NEXT: sd.convert %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<3>} : tensor<16xbf16> -> tensor<16xf32>
// CHECK-NEXT: sd.broadcast_in_dim %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<3>}
// CHECK-NEXT: sd.add %{{.*}} {sd_omp.plan = #sd_omp.kernel<3, fused>}
func.func @rounding_before_broadcast(%bias: tensor<16xf32>, %x: tensor<64x16xbf16>, %y: tensor<8x16xbf16>, %low: tensor<16xbf16>, %z: tensor<64x16xf32>) -> (tensor<64x16xbf16>, tensor<8x16xbf16>, tensor<64x16xf32>) {
  %b = sd.convert %bias : tensor<16xf32> -> tensor<16xbf16>
  %wide = sd.broadcast_in_dim %b dims = [1] : (tensor<16xbf16>) -> tensor<64x16xbf16>
  %s = sd.add %x, %wide : tensor<64x16xbf16>
  %b2 = sd.convert %bias : tensor<16xf32> -> tensor<16xbf16>
  %narrow = sd.broadcast_in_dim %b2 dims = [1] : (tensor<16xbf16>) -> tensor<8x16xbf16>
  %t = sd.add %y, %narrow : tensor<8x16xbf16>
  %w = sd.convert %low : tensor<16xbf16> -> tensor<16xf32>
  %wwide = sd.broadcast_in_dim %w dims = [1] : (tensor<16xf32>) -> tensor<64x16xf32>
  %u = sd.add %z, %wwide : tensor<64x16xf32>
  return %s, %t, %u : tensor<64x16xbf16>, tensor<8x16xbf16>, tensor<64x16xf32>
}

// -----

// A transpose that keeps the last dimension in place moves whole rows: an
// index map, a kernel of its own that its producers (a slice and reshape
// splitting the heads) fuse into, never fused into its users (which would
// gather it across a reshape). One that moves the last dimension is the
// runtime's blocked transpose.
// CHECK-LABEL: func.func @transpose_rows
// CHECK: sd.slice %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: sd.reshape %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: sd.transpose %{{.*}} permutation = [0, 2, 1, 3] {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NEXT: sd.transpose %{{.*}} permutation = [0, 1, 3, 2] {sd_omp.plan = #sd_omp.kernel<1, library>}
// CHECK-NEXT: sd.transpose %{{.*}} permutation = [0, 2, 1, 3] {sd_omp.plan = #sd_omp.kernel<2, fused>}
// CHECK-NEXT: sd.reshape %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<3>}
// CHECK-NEXT: sd.neg %{{.*}} {sd_omp.plan = #sd_omp.kernel<3, fused>}
func.func @transpose_rows(%x: tensor<2x8x3x32xbf16>, %y: tensor<2x4x8x8xbf16>) -> (tensor<2x4x8x8xbf16>, tensor<2x4x8x8xbf16>, tensor<2x8x32xbf16>) {
  %s = sd.slice %x start = [0, 0, 1, 0] limit = [2, 8, 2, 32] strides = [1, 1, 1, 1] : (tensor<2x8x3x32xbf16>) -> tensor<2x8x1x32xbf16>
  %r = sd.reshape %s : (tensor<2x8x1x32xbf16>) -> tensor<2x8x4x8xbf16>
  %t = sd.transpose %r permutation = [0, 2, 1, 3] : (tensor<2x8x4x8xbf16>) -> tensor<2x4x8x8xbf16>
  %u = sd.transpose %y permutation = [0, 1, 3, 2] : (tensor<2x4x8x8xbf16>) -> tensor<2x4x8x8xbf16>
  %b = sd.transpose %y permutation = [0, 2, 1, 3] : (tensor<2x4x8x8xbf16>) -> tensor<2x8x4x8xbf16>
  %m = sd.reshape %b : (tensor<2x8x4x8xbf16>) -> tensor<2x8x32xbf16>
  %n = sd.neg %m : tensor<2x8x32xbf16>
  return %t, %u, %n : tensor<2x4x8x8xbf16>, tensor<2x4x8x8xbf16>, tensor<2x8x32xbf16>
}
