// RUN: sdopt %s --emit=openmp | FileCheck %s

// A fused kernel that reads an operand through a reshape splits the linear
// offset into the operand's dimensions. Where the strides do not allow a
// symbolic split, the digit (offset / stride) % size is simplified first
// and computed in 32 bits where it fits, so that the gather vectorizes.

// Per-group values broadcast across a reshape (a group norm's backward):
// the terms that are multiples of the digit's span (6144 * j0, 96 * j1) go,
// and what is left cannot wrap around, so one division is left.
// CHECK-LABEL: SD_LOCAL void k0(const float *in0, const float *in1, float *out) {
// CHECK: const float {{v[0-9]+}} = in1[(j0) * 32 + ((static_cast<int32_t>(j2) / 3)) * 1];

// A digit of stride 1 whose loop terms wrap around its size: a remainder
// and no division.
// CHECK-LABEL: SD_LOCAL void k1(const float *in0, const float *in1, float *out) {
// CHECK: const float {{v[0-9]+}} = in1[(j0) * 12 + (((static_cast<int32_t>(8 * j1 + j2)) % 12)) * 1];

// A strided slice of a reshape: of the offset's constant term (9), the
// multiple of the stride (7) leaves the division; dimension 0's digit is
// affine (j0).
// CHECK-LABEL: SD_LOCAL void k2(const float *in0, const float *in1, float *out) {
// CHECK: const float {{v[0-9]+}} = in1[(j0) * 6 + ((static_cast<int32_t>(1) + static_cast<int32_t>(3 * j1 + 2) / 7)) * 1];

// An offset past 2^31 stays in 64 bits, unsimplified.
// CHECK-LABEL: SD_LOCAL void k3(const float *in0, const float *in1, float *out) {
// CHECK: const float {{v[0-9]+}} = in1[(((j0) / 3 % 1073741824)) * 1];
func.func @gathers(%x: tensor<8x64x96xf32>, %s: tensor<8x32xf32>,
                   %y: tensor<8x3x8xf32>, %t: tensor<8x12xf32>,
                   %z: tensor<8x11xf32>, %u: tensor<8x6xf32>,
                   %w: tensor<3221225472xf32>, %v: tensor<1073741824xf32>)
    -> (tensor<8x64x96xf32>, tensor<8x3x8xf32>, tensor<8x11xf32>, tensor<3221225472xf32>) {
  %sb = sd.broadcast_in_dim %s dims = [0, 2] : (tensor<8x32xf32>) -> tensor<8x64x32x3xf32>
  %sr = sd.reshape %sb : (tensor<8x64x32x3xf32>) -> tensor<8x64x96xf32>
  %a = sd.mul %x, %sr : tensor<8x64x96xf32>
  %tb = sd.broadcast_in_dim %t dims = [0, 2] : (tensor<8x12xf32>) -> tensor<8x2x12xf32>
  %tr = sd.reshape %tb : (tensor<8x2x12xf32>) -> tensor<8x3x8xf32>
  %b = sd.mul %y, %tr : tensor<8x3x8xf32>
  %ub = sd.broadcast_in_dim %u dims = [0, 1] : (tensor<8x6xf32>) -> tensor<8x6x7xf32>
  %ur = sd.reshape %ub : (tensor<8x6x7xf32>) -> tensor<8x42xf32>
  %us = sd.slice %ur start = [0, 9] limit = [8, 42] strides = [1, 3] : (tensor<8x42xf32>) -> tensor<8x11xf32>
  %c = sd.mul %z, %us : tensor<8x11xf32>
  %vb = sd.broadcast_in_dim %v dims = [0] : (tensor<1073741824xf32>) -> tensor<1073741824x3xf32>
  %vr = sd.reshape %vb : (tensor<1073741824x3xf32>) -> tensor<3221225472xf32>
  %d = sd.mul %w, %vr : tensor<3221225472xf32>
  return %a, %b, %c, %d : tensor<8x64x96xf32>, tensor<8x3x8xf32>, tensor<8x11xf32>, tensor<3221225472xf32>
}
