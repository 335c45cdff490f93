//===- LinalgTest.cpp - Tests of dot_general, conv2d and attention --------===//
//
// Every expected value below is worked out by hand in the comments.
//
//===----------------------------------------------------------------------===//

#include "ReferenceTestUtils.h"
#include "sd/Reference/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace sd::ref;

namespace {

TEST(LinalgTest, Matmul) {
  // [[1, 2, 3], [4, 5, 6]] x [[7, 8], [9, 10], [11, 12]]
  //   = [[1*7 + 2*9 + 3*11, 1*8 + 2*10 + 3*12], [...]] = [[58, 64], [139, 154]]
  Tensor a({2, 3}, DType::BF16, {1, 2, 3, 4, 5, 6});
  Tensor b({3, 2}, DType::F32, {7, 8, 9, 10, 11, 12});
  Tensor c = dotGeneral(a, b, {}, {}, {1}, {0});
  EXPECT_EQ(c.dtype(), DType::BF16);
  expectNear(c, {2, 2}, {58, 64, 139, 154});
  // Same product with b given transposed ([2, 3]) and contracted on dim 1.
  Tensor bt({2, 3}, DType::F32, {7, 9, 11, 8, 10, 12});
  expectNear(dotGeneral(a, bt, {}, {}, {1}, {1}), {2, 2}, {58, 64, 139, 154});
  // Contracting lhs dim 0 computes a^T x: [3, 2] x [2, 1].
  Tensor v({2, 1}, DType::F32, {1, -1});
  expectNear(dotGeneral(a, v, {}, {}, {0}, {0}), {3, 1}, {-3, -3, -3});
}

TEST(LinalgTest, DotGeneralOuterProductAndVectorDot) {
  Tensor u({2}, DType::F32, {1, 2});
  Tensor w({3}, DType::F32, {3, 4, 5});
  expectNear(dotGeneral(u, w, {}, {}, {}, {}), {2, 3}, {3, 4, 5, 6, 8, 10});
  expectNear(dotGeneral(w, w, {}, {}, {0}, {0}), {}, {50});
}

TEST(LinalgTest, DotGeneralBatchAndTwoContractingDims) {
  // lhs[b, m, k1, k2] = 8b + 4m + 2k1 + k2 + 1 (values 1..16), shape
  // [2, 2, 2, 2]. rhs has dims (k2, b, k1, n), shape [2, 2, 2, 2]:
  //   rhs[., b, ., 0] = b + 1;  rhs[k2, b, k1, 1] = b + 1 if (k1, k2) = (0, 1)
  //   else 0.
  std::vector<double> lhsValues(16);
  for (int i = 0; i < 16; ++i)
    lhsValues[i] = i + 1;
  Tensor lhs({2, 2, 2, 2}, DType::F32, lhsValues);
  Tensor rhs({2, 2, 2, 2}, DType::F32,
             {1, 0, 1, 0, 2, 0, 2, 0, 1, 1, 1, 0, 2, 2, 2, 0});
  // Batch: lhs 0 <-> rhs 1. Contracting: lhs k1 (2) <-> rhs 2, lhs k2 (3) <->
  // rhs 0. Result [b, m, n]. With base = 8b + 4m:
  //   n = 0: (b + 1) * sum_k lhs = (b + 1) * (4 base + 10):
  //          b0m0 10, b0m1 26, b1m0 2*42 = 84, b1m1 2*58 = 116.
  //   n = 1: (b + 1) * lhs[b, m, 0, 1] = (b + 1) * (base + 2):
  //          b0m0 2, b0m1 6, b1m0 2*10 = 20, b1m1 2*14 = 28.
  Tensor r = dotGeneral(lhs, rhs, {0}, {1}, {2, 3}, {2, 0});
  expectNear(r, {2, 2, 2}, {10, 2, 26, 6, 84, 20, 116, 28});
}

TEST(LinalgTest, DotGeneralResultDimOrder) {
  // Batch dims first, then lhs free, then rhs free, even when the batch dim is
  // last in both operands. lhs [m=2, b=2] = [[1, 2], [3, 4]], rhs [n=3, b=2]
  // = [[1, 0], [0, 1], [1, 1]]: result[b, m, n] = lhs[m, b] * rhs[n, b].
  Tensor lhs({2, 2}, DType::F32, {1, 2, 3, 4});
  Tensor rhs({3, 2}, DType::F32, {1, 0, 0, 1, 1, 1});
  // b = 0: lhs col [1, 3], rhs col [1, 0, 1] -> [[1, 0, 1], [3, 0, 3]].
  // b = 1: lhs col [2, 4], rhs col [0, 1, 1] -> [[0, 2, 2], [0, 4, 4]].
  expectNear(dotGeneral(lhs, rhs, {1}, {1}, {}, {}), {2, 2, 3},
             {1, 0, 1, 3, 0, 3, 0, 2, 2, 0, 4, 4});
}

TEST(LinalgTest, Conv2dSimple) {
  // 2x2 all-ones kernel over a 2x2 image: the sum 1 + 2 + 3 + 4.
  Tensor x({1, 2, 2, 1}, DType::F32, {1, 2, 3, 4});
  Tensor w({2, 2, 1, 1}, DType::F32, {1, 1, 1, 1});
  expectNear(conv2d(x, w, nullptr, {1, 1}, {0, 0, 0, 0}), {1, 1, 1, 1}, {10});
  // 1x1 conv mixing channels: w[0, 0, ci, o] = [[1, 2], [3, 4]];
  //   o0 = 1*1 + 2*3 = 7, o1 = 1*2 + 2*4 = 10, plus bias [1, -1].
  Tensor px({1, 1, 1, 2}, DType::F32, {1, 2});
  Tensor mix({1, 1, 2, 2}, DType::F32, {1, 2, 3, 4});
  Tensor bias({2}, DType::F32, {1, -1});
  expectNear(conv2d(px, mix, &bias, {1, 1}, {0, 0, 0, 0}), {1, 1, 1, 2},
             {8, 9});
}

TEST(LinalgTest, Conv2dStridePaddingGroups) {
  // x [1, 3, 3, 2]: channel 0 = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], channel 1
  // = identity 3x3. Kernel [2, 2, 1, 2], groups = 2: output 0 reads channel
  // 0 with k0 = [[1, 2], [3, 4]], output 1 reads channel 1 with
  // k1 = [[1, -1], [2, 1]]. Stride 2, padding top = left = 1, bottom = right
  // = 0: Ho = Wo = (3 + 1 - 2) / 2 + 1 = 2; output (oy, ox) reads input rows
  // 2oy - 1 + ky and columns 2ox - 1 + kx. Bias [0.5, -1].
  Tensor x({1, 3, 3, 2}, DType::F32,
           {1, 1, 2, 0, 3, 0, 4, 0, 5, 1, 6, 0, 7, 0, 8, 0, 9, 1});
  Tensor w({2, 2, 1, 2}, DType::F32, {1, 1, 2, -1, 3, 2, 4, 1});
  Tensor bias({2}, DType::F32, {0.5, -1});
  // Channel 0:
  //   (0,0): only tap (1,1) is inside: 1*4 = 4
  //   (0,1): taps (1,0),(1,1) on row 0, cols 1-2: 2*3 + 3*4 = 18
  //   (1,0): taps (0,1),(1,1) on rows 1-2, col 0: 4*2 + 7*4 = 36
  //   (1,1): rows 1-2, cols 1-2: 5*1 + 6*2 + 8*3 + 9*4 = 77
  // Channel 1 (identity image):
  //   (0,0): 1*1 = 1;  (0,1): 0;  (1,0): 0;
  //   (1,1): x[1][1]*1 + x[1][2]*(-1) + x[2][1]*2 + x[2][2]*1 = 1 + 1 = 2
  Tensor y = conv2d(x, w, &bias, {2, 2}, {1, 0, 1, 0}, /*groups=*/2);
  EXPECT_EQ(y.dtype(), DType::F32);
  expectNear(y, {1, 2, 2, 2}, {4.5, 0, 18.5, -1, 36.5, -1, 77.5, 1});
}

TEST(LinalgTest, Conv2dAsymmetricStrideAndPadding) {
  // x [1, 1, 3, 1] = [1, 2, 3], 1x2 kernel [1, 10], stride (1, 2), padding
  // right = 1: padded row [1, 2, 3, 0]; windows at columns 0 and 2:
  //   1 + 20 = 21, 3 + 0 = 3.
  Tensor x({1, 1, 3, 1}, DType::F32, {1, 2, 3});
  Tensor w({1, 2, 1, 1}, DType::F32, {1, 10});
  expectNear(conv2d(x, w, nullptr, {1, 2}, {0, 0, 0, 1}), {1, 1, 2, 1},
             {21, 3});
}

TEST(LinalgTest, AttentionWithMask) {
  // B = H = 1, Sq = 2, Skv = 3, D = 1, Dv = 2, scale 0.5.
  // q = [2, 0] so scale * q = [1, 0]; k = [0, ln 2, ln 3]:
  //   row 0 logits [0, ln 2, ln 3] -> weights proportional to 1, 2, 3;
  //   row 1 logits all 0 -> uniform.
  // v rows: [1, 0], [0, 1], [10, 10].
  Tensor q({1, 1, 2, 1}, DType::F32, {2, 0});
  Tensor k({1, 1, 3, 1}, DType::F32, {0, std::log(2.0), std::log(3.0)});
  Tensor v({1, 1, 3, 2}, DType::F32, {1, 0, 0, 1, 10, 10});
  // Unmasked: row 0 = (1*[1,0] + 2*[0,1] + 3*[10,10]) / 6 = [31/6, 32/6];
  //           row 1 = ([1,0] + [0,1] + [10,10]) / 3 = [11/3, 11/3].
  expectNear(attention(q, k, v, nullptr, 0.5), {1, 1, 2, 2},
             {31.0 / 6, 32.0 / 6, 11.0 / 3, 11.0 / 3});
  // Mask out key 2 for row 0 and key 0 for row 1:
  //   row 0 = (1*[1,0] + 2*[0,1]) / 3 = [1/3, 2/3];
  //   row 1 = ([0,1] + [10,10]) / 2 = [5, 5.5].
  Tensor mask({1, 1, 2, 3}, DType::I1, {1, 1, 0, 0, 1, 1});
  expectNear(attention(q, k, v, &mask, 0.5), {1, 1, 2, 2},
             {1.0 / 3, 2.0 / 3, 5, 5.5});
}

TEST(LinalgTest, AttentionMaskBroadcastAndEmptyRows) {
  // H = 2 heads, Sq = 1, Skv = 2, D = Dv = 1; q = 0 gives equal logits.
  Tensor q({1, 2, 1, 1}, DType::F32, {0, 0});
  Tensor k({1, 2, 2, 1}, DType::F32, {1, 2, 3, 4});
  Tensor v({1, 2, 2, 1}, DType::F32, {3, 7, 5, 9});
  // One mask row shared by both heads ([1, 1, 1, 2]): only key 0 -> v[0].
  Tensor first({1, 1, 1, 2}, DType::I1, {1, 0});
  expectNear(attention(q, k, v, &first, 1.0), {1, 2, 1, 1}, {3, 5});
  // Nothing to attend to: the documented result is zeros, not NaN.
  Tensor none({1, 1, 1, 2}, DType::I1, {0, 0});
  expectNear(attention(q, k, v, &none, 1.0), {1, 2, 1, 1}, {0, 0});
  // Per-head mask [1, 2, 1, 2]: head 0 key 1, head 1 both keys.
  Tensor perHead({1, 2, 1, 2}, DType::I1, {0, 1, 1, 1});
  expectNear(attention(q, k, v, &perHead, 1.0), {1, 2, 1, 1}, {7, 7});
}

TEST(LinalgTest, AttentionLargeLogitsAndBatches) {
  // Two batches; logits 1000 and 1000 + ln 3 must not overflow: weights
  // 1/4, 3/4 on v = [4, 8] gives 7. Batch 1 has q = 0: mean of [2, 6] = 4.
  Tensor q({2, 1, 1, 1}, DType::F32, {1000, 0});
  Tensor k({2, 1, 2, 1}, DType::F32, {1, 1 + std::log(3.0) / 1000, 5, 6});
  Tensor v({2, 1, 2, 1}, DType::F32, {4, 8, 2, 6});
  expectNear(attention(q, k, v, nullptr, 1.0), {2, 1, 1, 1}, {7, 4}, 1e-9);
}

} // namespace
