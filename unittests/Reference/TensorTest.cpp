//===- TensorTest.cpp - Tests of the reference Tensor and rounding --------===//

#include "sd/Reference/Tensor.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

using namespace sd::ref;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(TensorTest, ShapeStridesAndIndexing) {
  std::vector<double> values(24);
  for (int i = 0; i < 24; ++i)
    values[i] = i;
  Tensor t({2, 3, 4}, DType::F32, values);
  EXPECT_TRUE(t.isValid());
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.dim(1), 3);
  EXPECT_EQ(t.numElements(), 24);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  // Row-major: [1, 2, 3] is 1*12 + 2*4 + 3 = 23.
  EXPECT_EQ(t.at({1, 2, 3}), 23.0);
  EXPECT_EQ(t.at({0, 1, 0}), 4.0);
  t.at({1, 0, 1}) = -5.0;
  EXPECT_EQ(t[13], -5.0);
  t[0] = 7.0;
  EXPECT_EQ(t.values()[0], 7.0);
}

TEST(TensorTest, FillScalarAndInvalid) {
  Tensor filled({2, 2}, DType::BF16, 1.5);
  EXPECT_EQ(filled.values(), (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
  EXPECT_EQ(filled.dtype(), DType::BF16);
  filled.setDType(DType::F64);
  EXPECT_EQ(filled.dtype(), DType::F64);

  Tensor s = Tensor::scalar(3.0);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numElements(), 1);
  EXPECT_EQ(s[0], 3.0);
  EXPECT_EQ(s.dtype(), DType::F32);
  EXPECT_TRUE(s.strides().empty());

  Tensor empty({2, 0}, DType::F32);
  EXPECT_TRUE(empty.isValid());
  EXPECT_EQ(empty.numElements(), 0);

  Tensor invalid;
  EXPECT_FALSE(invalid.isValid());
  EXPECT_EQ(invalid.numElements(), 0);
}

TEST(TensorTest, RoundToBF16TiesToEven) {
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7 (bf16 keeps 7 fraction
  // bits); the tie goes to the even neighbour, 1.
  EXPECT_EQ(roundTo(DType::BF16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(roundTo(DType::BF16, -(1.0 + std::ldexp(1.0, -8))), -1.0);
  // 1 + 3*2^-9 is above that midpoint: rounds up to 1 + 2^-7 = 1.0078125.
  EXPECT_EQ(roundTo(DType::BF16, 1.0 + 3 * std::ldexp(1.0, -9)), 1.0078125);
  // 1 + 3*2^-8 is the midpoint of 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(roundTo(DType::BF16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.015625);
  // Just off a midpoint rounds to the nearer neighbour, even where the offset
  // is below float's resolution (rounding via float would see a tie).
  EXPECT_EQ(roundTo(DType::BF16, 1.0 + std::ldexp(1.0, -8) - 1e-12), 1.0);
  EXPECT_EQ(roundTo(DType::BF16, 1.0 + std::ldexp(1.0, -8) + 1e-12), 1.0078125);
  // Exactly representable values are unchanged.
  EXPECT_EQ(roundTo(DType::BF16, 3.0), 3.0);
  EXPECT_EQ(roundTo(DType::BF16, 0.0), 0.0);
  EXPECT_TRUE(std::signbit(roundTo(DType::BF16, -0.0)));
}

TEST(TensorTest, RoundToBF16SpecialValues) {
  EXPECT_TRUE(std::isnan(roundTo(DType::BF16, kNaN)));
  EXPECT_EQ(roundTo(DType::BF16, kInf), kInf);
  EXPECT_EQ(roundTo(DType::BF16, -kInf), -kInf);
  // Largest finite bf16 is 255 * 2^120 (0x7F7F); f32's max rounds past it.
  double maxBF16 = std::ldexp(255.0, 120);
  EXPECT_EQ(roundTo(DType::BF16, maxBF16), maxBF16);
  EXPECT_EQ(roundTo(DType::BF16, std::numeric_limits<float>::max()), kInf);
  EXPECT_EQ(roundTo(DType::BF16, -std::numeric_limits<float>::max()), -kInf);
  // Subnormals: the step below 2^-126 is 2^-133; 2^-134 is a tie -> 0.
  EXPECT_EQ(roundTo(DType::BF16, std::ldexp(1.0, -133)), std::ldexp(1.0, -133));
  EXPECT_EQ(roundTo(DType::BF16, std::ldexp(1.0, -134)), 0.0);
  EXPECT_EQ(roundTo(DType::BF16, std::ldexp(3.0, -135)), std::ldexp(1.0, -133));
  EXPECT_EQ(roundTo(DType::BF16, std::ldexp(3.0, -134)), std::ldexp(2.0, -133));
}

TEST(TensorTest, RoundToOtherTypes) {
  EXPECT_EQ(roundTo(DType::F32, 0.1), 0.100000001490116119384765625);
  EXPECT_EQ(roundTo(DType::F32, 1.0 + std::ldexp(1.0, -30)), 1.0);
  EXPECT_EQ(roundTo(DType::F64, 0.1), 0.1);
  EXPECT_EQ(roundTo(DType::I1, 0.5), 1.0);
  EXPECT_EQ(roundTo(DType::I1, -2.0), 1.0);
  EXPECT_EQ(roundTo(DType::I1, 0.0), 0.0);

  Tensor t({3}, DType::BF16, {1.0 + std::ldexp(1.0, -8), 2.0, 0.1});
  t.roundToDType();
  // 0.1 in bf16 is 0x3DCD = 0.10009765625.
  EXPECT_EQ(t.values(), (std::vector<double>{1.0, 2.0, 0.10009765625}));
}

TEST(TensorTest, ToString) {
  Tensor t({2, 2}, DType::F32, {1, 2, 3, 4});
  EXPECT_EQ(t.toString(), "tensor<2x2xf32> [1, 2, 3, 4]");
  EXPECT_EQ(t.toString(2), "tensor<2x2xf32> [1, 2, ...]");
  EXPECT_EQ(Tensor::scalar(0.5, DType::BF16).toString(), "tensor<bf16> [0.5]");
  EXPECT_EQ(Tensor().toString(), "<invalid tensor>");
}

TEST(TensorTest, Differences) {
  Tensor actual({3}, DType::F32, {1.0, 2.2, 0.0});
  Tensor expected({3}, DType::F32, {1.0, 2.0, 1e-9});
  // 0.2 / 2 = 0.1 dominates; the near-zero element contributes
  // 1e-9 / absFloor(1e-6) = 1e-3.
  EXPECT_NEAR(maxRelativeDifference(actual, expected), 0.1, 1e-12);
  EXPECT_NEAR(maxAbsoluteDifference(actual, expected), 0.2, 1e-12);
  EXPECT_EQ(maxRelativeDifference(expected, expected), 0.0);

  Tensor nan({2}, DType::F32, {kNaN, kInf});
  EXPECT_EQ(maxRelativeDifference(nan, nan), 0.0);
  Tensor finite({2}, DType::F32, {1.0, 1.0});
  EXPECT_EQ(maxRelativeDifference(nan, finite), kInf);
  EXPECT_EQ(maxRelativeDifference(finite, nan), kInf);
  EXPECT_EQ(maxRelativeDifference(finite, Tensor({1, 2}, DType::F32, 1.0)),
            kInf);
}

} // namespace
