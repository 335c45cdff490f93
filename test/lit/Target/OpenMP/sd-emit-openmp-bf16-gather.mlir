// RUN: sdopt %s --emit=openmp | FileCheck %s

// A small bf16 operand that a kernel gathers (here per-group values
// broadcast across a reshape, as a group norm's backward reads its
// statistics: an offset with / and %) is widened once into an f32 array
// before the loops and gathered as f32; a contiguous bf16 operand is
// converted where it is read, and a large gathered one (over 4096
// elements) too.
// CHECK-LABEL: SD_LOCAL void k0(const sd_bf16 *in0, const sd_bf16 *in1, sd_bf16 *out) {
// CHECK-NEXT: float w1[64];
// CHECK-NEXT: for (int64_t e = 0; e < 64; ++e) w1[e] = sd_bf16_to_f32(in1[e]);
// CHECK-NOT: float w0
// CHECK: const float {{v[0-9]+}} = sd_bf16_to_f32(in0[6144 * j0 + 96 * j1 + j2]);
// CHECK-NEXT: const float {{v[0-9]+}} = w1[(j0) * 32 + ((static_cast<int32_t>(j2) / 3)) * 1];
// CHECK-LABEL: SD_LOCAL void k1(const sd_bf16 *in0, const sd_bf16 *in1, sd_bf16 *out) {
// CHECK-NOT: float w
// CHECK: sd_bf16_to_f32(in1[(j0) * 8192 + ((static_cast<int32_t>(j2) / 3)) * 1]);
func.func @gathered(%x: tensor<2x64x96xbf16>, %s: tensor<2x32xbf16>, %l: tensor<2x8192xbf16>, %xl: tensor<2x2x24576xbf16>) -> (tensor<2x64x96xbf16>, tensor<2x2x24576xbf16>) {
  %b = sd.broadcast_in_dim %s dims = [0, 2] : (tensor<2x32xbf16>) -> tensor<2x64x32x3xbf16>
  %r = sd.reshape %b : (tensor<2x64x32x3xbf16>) -> tensor<2x64x96xbf16>
  %y = sd.mul %x, %r : tensor<2x64x96xbf16>
  %bl = sd.broadcast_in_dim %l dims = [0, 2] : (tensor<2x8192xbf16>) -> tensor<2x2x8192x3xbf16>
  %rl = sd.reshape %bl : (tensor<2x2x8192x3xbf16>) -> tensor<2x2x24576xbf16>
  %yl = sd.mul %xl, %rl : tensor<2x2x24576xbf16>
  return %y, %yl : tensor<2x64x96xbf16>, tensor<2x2x24576xbf16>
}
