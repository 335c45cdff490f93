//===- NormTest.cpp - Tests of normalization and softmax kernels ----------===//
//
// Expected values are worked out by hand in the comments (square roots written
// as decimal constants).
//
//===----------------------------------------------------------------------===//

#include "ReferenceTestUtils.h"
#include "sd/Reference/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace sd::ref;

namespace {

// 1 / sqrt(2/3): the normalized value of 3 in {1, 2, 3} (mean 2, biased
// variance 2/3).
const double kA = 1.224744871391589;

TEST(NormTest, LayerNorm) {
  // Row [1, 2, 3]: mean 2, biased var 2/3 -> [-1, 0, 1] / sqrt(2/3).
  // Row [2, 4, 6]: mean 4, var 8/3 -> [-2, 0, 2] / sqrt(8/3), the same.
  Tensor x({2, 3}, DType::BF16, {1, 2, 3, 2, 4, 6});
  Tensor y = layerNorm(x, nullptr, nullptr, 0.0);
  EXPECT_EQ(y.dtype(), DType::BF16);
  expectNear(y, {2, 3}, {-kA, 0, kA, -kA, 0, kA});
  // scale [1, 2, 3], bias [0, 1, 0]: [-kA, 1, 3 kA].
  Tensor scale({3}, DType::F32, {1, 2, 3});
  Tensor bias({3}, DType::F32, {0, 1, 0});
  expectNear(layerNorm(x, &scale, &bias, 0.0), {2, 3},
             {-kA, 1, 3 * kA, -kA, 1, 3 * kA});
  // eps enters under the root: [1, 3] has var 1, eps 3 -> [-1, 1] / 2.
  expectNear(layerNorm(Tensor({2}, DType::F32, {1, 3}), nullptr, nullptr, 3.0),
             {2}, {-0.5, 0.5});
}

TEST(NormTest, RmsNorm) {
  // [3, 4]: mean square (9 + 16) / 2 = 12.5, rms 3.5355339...
  //   -> [0.848528137423857, 1.131370849898476].
  Tensor x({1, 2}, DType::F32, {3, 4});
  expectNear(rmsNorm(x, nullptr, 0.0), {1, 2},
             {0.848528137423857, 1.131370849898476});
  Tensor scale({2}, DType::F32, {2, 0.5});
  expectNear(rmsNorm(x, &scale, 0.0), {1, 2},
             {1.697056274847714, 0.565685424949238});
  // [2]: mean square 4, eps 5 -> 2 / 3. Rows are independent.
  expectNear(rmsNorm(Tensor({2, 1}, DType::F32, {2, 0}), nullptr, 5.0), {2, 1},
             {2.0 / 3, 0});
}

// Group norm data [N=1, L=2, C=4], groups = 2:
//   position 0: [1, 2, 10, 10], position 1: [3, 4, 10, 30].
// Group 0 = {1, 2, 3, 4}: mean 2.5, var 1.25, sqrt 1.118033988749895:
//   1 -> -1.3416407864998738, 2 -> -0.4472135954999579, 3, 4 symmetric.
// Group 1 = {10, 10, 10, 30}: mean 15, var 75, sqrt 8.660254037844386:
//   10 -> -0.5773502691896257, 30 -> 1.7320508075688772.
const double kG1 = 1.3416407864998738, kG2 = 0.4472135954999579;
const double kH1 = 0.5773502691896257, kH2 = 1.7320508075688772;
const std::vector<double> kGroupInput = {1, 2, 10, 10, 3, 4, 10, 30};
const std::vector<double> kGroupOutput = {-kG1, -kG2, -kH1, -kH1,
                                          kG2,  kG1,  -kH1, kH2};

TEST(NormTest, GroupNormSequence) {
  Tensor x({1, 2, 4}, DType::F32, kGroupInput);
  expectNear(groupNorm(x, nullptr, nullptr, 2, 0.0), {1, 2, 4}, kGroupOutput);
  // scale [1, 1, 2, 2], bias [0, 0, 1, 1] on group 1: 2 * -kH1 + 1 and
  // 2 * kH2 + 1.
  Tensor scale({4}, DType::F32, {1, 1, 2, 2});
  Tensor bias({4}, DType::F32, {0, 0, 1, 1});
  expectNear(groupNorm(x, &scale, &bias, 2, 0.0), {1, 2, 4},
             {-kG1, -kG2, 1 - 2 * kH1, 1 - 2 * kH1, kG2, kG1, 1 - 2 * kH1,
              1 + 2 * kH2});
}

TEST(NormTest, GroupNormImagesAndBatches) {
  // Same data as NHWC [1, 1, 2, 4]: the spatial dims are flattened.
  Tensor img({1, 1, 2, 4}, DType::F32, kGroupInput);
  expectNear(groupNorm(img, nullptr, nullptr, 2, 0.0), {1, 1, 2, 4},
             kGroupOutput);
  // A second sample equal to 10 * first + 5 has its own statistics and
  // therefore normalizes to the same values.
  std::vector<double> two = kGroupInput;
  for (double v : kGroupInput)
    two.push_back(10 * v + 5);
  std::vector<double> expected = kGroupOutput;
  expected.insert(expected.end(), kGroupOutput.begin(), kGroupOutput.end());
  expectNear(
      groupNorm(Tensor({2, 2, 4}, DType::F32, two), nullptr, nullptr, 2, 0.0),
      {2, 2, 4}, expected);
  // groups = C is instance norm per channel: channel 0 = {1, 3} -> [-1, 1];
  // the constant channel 2 gives 0 thanks to eps (0 / sqrt(0) would be NaN).
  expectNear(groupNorm(Tensor({1, 2, 4}, DType::F32, kGroupInput), nullptr,
                       nullptr, 4, 1e-12),
             {1, 2, 4}, {-1, -1, 0, -1, 1, 1, 0, 1});
}

TEST(NormTest, SoftmaxLargeValues) {
  // softmax([1000, 1001, 1002]) = [e^-2, e^-1, 1] / (e^-2 + e^-1 + 1):
  // a naive exp(1000) would overflow to inf and give NaN.
  Tensor x({3}, DType::F32, {1000, 1001, 1002});
  expectNear(softmax(x, 0), {3},
             {0.09003057317038046, 0.24472847105479764, 0.6652409557748218},
             1e-15);
}

TEST(NormTest, SoftmaxAlongEachDim) {
  // [[0, 0], [ln 3, 0]]: along dim 0, column 0 -> [1, 3] / 4, column 1 ->
  // [1/2, 1/2]; along dim 1, row 0 -> [1/2, 1/2], row 1 -> [3/4, 1/4].
  Tensor x({2, 2}, DType::F32, {0, 0, std::log(3.0), 0});
  expectNear(softmax(x, 0), {2, 2}, {0.25, 0.5, 0.75, 0.5});
  expectNear(softmax(x, 1), {2, 2}, {0.5, 0.5, 0.75, 0.25});
  // Middle dimension of a rank-3 tensor: [1, 2, 2] behaves like dim 0 above.
  expectNear(
      softmax(Tensor({1, 2, 2}, DType::F32, {0, 0, std::log(3.0), 0}), 1),
      {1, 2, 2}, {0.25, 0.5, 0.75, 0.5});
}

} // namespace
