// RUN: sdopt %s --emit=openmp | FileCheck %s

// bf16 buffers hold sd_bf16 elements in the frame's float slots. The GEMM
// runs on bf16 operands (f32 accumulation) into a bf16 result; a fused
// kernel widens on load, rounds each bf16 op's result and rounds on store;
// layer_norm, group_norm, softmax, attention and the convolutions read and
// write bf16 themselves (the filter gradient into the f32 kernel its result
// type asks for); the random generator, which writes f32 only, is rounded
// after; a reduction rounds its double accumulator to bf16 once.
// CHECK-LABEL: from @bf16_step
// CHECK: static inline sd_bf16 sd_double_to_bf16(double d) {
// A non-splat bf16 constant: its bits (16.5 is 0x4184).
// CHECK: static const sd_bf16 [[CST:cst[0-9]+]][] = {
// CHECK-NEXT: {0x3F80}, {0x4000},
// CHECK-NEXT: {0x4184},
// CHECK: static const int32_t sd_argument_types[] = {
// CHECK-NEXT: SD_BF16, SD_BF16, SD_BF16, SD_BF16, SD_BF16,};
// CHECK-NEXT: static const int32_t sd_result_types[] = {
// CHECK-NEXT: SD_BF16, SD_BF16, SD_F32, SD_BF16, SD_BF16, SD_BF16, SD_BF16, SD_F32, SD_BF16,};
// CHECK: [[Y:b\[[0-9]+\]]] = static_cast<float *>(api->alloc(dev, 256, SD_DEVICE_MEMORY, "%1 = sd.dot_general
// CHECK: api->gemm_bf16(dev, 1, 0, 0, 8, 16, 32, reinterpret_cast<sd_bf16 *>(a[0]), 32, 256, reinterpret_cast<sd_bf16 *>(a[1]), 16, 512, reinterpret_cast<sd_bf16 *>([[Y]]), SD_BF16, 16, 128);
// CHECK: [[ADD:k[0-9]+]](reinterpret_cast<sd_bf16 *>([[Y]]), const_cast<sd_bf16 *>([[CST]]), reinterpret_cast<sd_bf16 *>([[Z:b\[[0-9]+\]]]));
// CHECK: api->layer_norm_bf16(dev, reinterpret_cast<sd_bf16 *>([[Z]]), nullptr, nullptr, reinterpret_cast<sd_bf16 *>([[N:b\[[0-9]+\]]]), 8, 16,
// CHECK: api->attention_bf16(dev, reinterpret_cast<sd_bf16 *>(a[2]), reinterpret_cast<sd_bf16 *>(a[2]), reinterpret_cast<sd_bf16 *>(a[2]), nullptr, 1, 1, reinterpret_cast<sd_bf16 *>(b[{{[0-9]+}}]), 1, 2, 8, 8, 4, 4,
// CHECK: api->group_norm_bf16(dev, reinterpret_cast<sd_bf16 *>(a[2]), reinterpret_cast<sd_bf16 *>(a[3]), reinterpret_cast<sd_bf16 *>(a[3]), reinterpret_cast<sd_bf16 *>(b[{{[0-9]+}}]), 1, 16, 4, 2,
// The convolution reads its one operand twice, as it is.
// CHECK: api->conv2d_bf16(dev, reinterpret_cast<sd_bf16 *>(a[4]), reinterpret_cast<sd_bf16 *>(a[4]), nullptr, reinterpret_cast<sd_bf16 *>([[CONV:b\[[0-9]+\]]]),
// CHECK: api->conv2d_input_grad_bf16(dev, reinterpret_cast<sd_bf16 *>([[CONV]]), reinterpret_cast<sd_bf16 *>(a[4]), reinterpret_cast<sd_bf16 *>(b[{{[0-9]+}}]),
// CHECK: api->conv2d_filter_grad_bf16(dev, reinterpret_cast<sd_bf16 *>(a[4]), reinterpret_cast<sd_bf16 *>([[CONV]]), b[{{[0-9]+}}], SD_F32,
// CHECK: api->rng(dev, 1, 7ull, [[RNG:b\[[0-9]+\]]],
// CHECK: [[NARROW:k[0-9]+]]([[RNG]], reinterpret_cast<sd_bf16 *>(
// CHECK: results[0] = reinterpret_cast<sd_bf16 *>([[N]]);
// CHECK: SD_LOCAL void [[ADD]](const sd_bf16 *in0, const sd_bf16 *in1, sd_bf16 *out) {
// CHECK: const float [[L:v[0-9]+]] = sd_bf16_to_f32(in0[16 * j0 + j1]);
// CHECK: = sd_round_bf16([[L]] + v{{[0-9]+}});
// CHECK: out[16 * j0 + j1] = sd_bf16_of_exact(
// CHECK: reduce over [8, 16]
// CHECK: const float {{v[0-9]+}} = sd_bf16_to_f32(in0[16 * j0 + j1]);
// CHECK: out[0 + b] = sd_double_to_bf16(acc[b]);
// CHECK: SD_LOCAL void [[NARROW]](const float *in0, sd_bf16 *out) {
func.func @bf16_step(%x: tensor<8x32xbf16>, %w: tensor<32x16xbf16>, %q: tensor<1x2x8x4xbf16>, %s: tensor<4xbf16>, %cw: tensor<1x1x1x1xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xf32>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x1x1x1xbf16>, tensor<1x1x1x1xbf16>, tensor<1x1x1x1xf32>, tensor<8x4xbf16>) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
  %c = sd.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.5]> : tensor<16xbf16>
  %cb = sd.broadcast_in_dim %c dims = [1] : (tensor<16xbf16>) -> tensor<8x16xbf16>
  %z = sd.add %y, %cb : tensor<8x16xbf16>
  %n = sd.layer_norm %z : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %r = sd.reduce_sum %n dims = [0] : (tensor<8x16xbf16>) -> tensor<16xbf16>
  %f = sd.convert %n : tensor<8x16xbf16> -> tensor<8x16xf32>
  %a = sd.attention %q, %q, %q : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>) -> tensor<1x2x8x4xbf16>
  %g = sd.group_norm %q scale %s bias %s groups = 2 : (tensor<1x2x8x4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> tensor<1x2x8x4xbf16>
  %cv = sd.conv2d %cw, %cw strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<1x1x1x1xbf16>, tensor<1x1x1x1xbf16>) -> tensor<1x1x1x1xbf16>
  %dx = sd.conv2d_input_grad %cv, %cw strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<1x1x1x1xbf16>, tensor<1x1x1x1xbf16>) -> tensor<1x1x1x1xbf16>
  %dw = sd.conv2d_filter_grad %cw, %cv strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<1x1x1x1xbf16>, tensor<1x1x1x1xbf16>) -> tensor<1x1x1x1xf32>
  %rn = sd.rng_normal seed = 7 {mean = 1.0 : f64, stddev = 2.0e-2 : f64} : tensor<8x4xbf16>
  return %n, %r, %f, %a, %g, %cv, %dx, %dw, %rn : tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xf32>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x1x1x1xbf16>, tensor<1x1x1x1xbf16>, tensor<1x1x1x1xf32>, tensor<8x4xbf16>
}
