//===- ElementwiseTest.cpp - Tests of elementwise reference kernels -------===//
//
// Expected values are written out by hand (or are textbook constants), never
// recomputed with the code under test.
//
//===----------------------------------------------------------------------===//

#include "ReferenceTestUtils.h"
#include "sd/Reference/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

using namespace sd::ref;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ElementwiseTest, UnaryScalarFunctions) {
  EXPECT_EQ(applyUnary(UnaryKind::Neg, 2.0), -2.0);
  EXPECT_EQ(applyUnary(UnaryKind::Abs, -3.0), 3.0);
  EXPECT_NEAR(applyUnary(UnaryKind::Exp, 1.0), 2.718281828459045, 1e-15);
  EXPECT_NEAR(applyUnary(UnaryKind::Log, 2.718281828459045), 1.0, 1e-15);
  EXPECT_EQ(applyUnary(UnaryKind::Sqrt, 9.0), 3.0);
  EXPECT_EQ(applyUnary(UnaryKind::Rsqrt, 4.0), 0.5);
  EXPECT_EQ(applyUnary(UnaryKind::Tanh, 0.0), 0.0);
  EXPECT_NEAR(applyUnary(UnaryKind::Tanh, 1.0), 0.7615941559557649, 1e-15);
  EXPECT_NEAR(applyUnary(UnaryKind::Sin, 1.5707963267948966), 1.0, 1e-15);
  EXPECT_EQ(applyUnary(UnaryKind::Cos, 0.0), 1.0);
  EXPECT_TRUE(std::isnan(applyUnary(UnaryKind::Log, -1.0)));
}

TEST(ElementwiseTest, SigmoidAndSiluAreStable) {
  EXPECT_EQ(applyUnary(UnaryKind::Sigmoid, 0.0), 0.5);
  // 1 / (1 + e^-1).
  EXPECT_NEAR(applyUnary(UnaryKind::Sigmoid, 1.0), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(applyUnary(UnaryKind::Sigmoid, -1.0), 1 - 0.7310585786300049,
              1e-15);
  // No overflow to NaN at the extremes.
  EXPECT_EQ(applyUnary(UnaryKind::Sigmoid, 1000.0), 1.0);
  EXPECT_EQ(applyUnary(UnaryKind::Sigmoid, -1000.0), 0.0);
  EXPECT_NEAR(applyUnary(UnaryKind::Silu, 1.0), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(applyUnary(UnaryKind::Silu, -1.0), -(1 - 0.7310585786300049),
              1e-15);
  EXPECT_EQ(applyUnary(UnaryKind::Silu, -1000.0), -0.0);
}

TEST(ElementwiseTest, GeluVariants) {
  // torch.nn.functional.gelu(x, approximate="tanh") at +-1.
  Tensor x({2}, DType::F32, {1.0, -1.0});
  expectNear(gelu(x, /*tanhApproximation=*/true), {2},
             {0.8411919906082768, -0.15880800939172324}, 1e-15);
  // Exact gelu: x * Phi(x) with Phi(1) = 0.8413447460685429.
  expectNear(gelu(x, /*tanhApproximation=*/false), {2},
             {0.8413447460685429, -0.15865525393145707}, 1e-15);
  EXPECT_EQ(applyUnary(UnaryKind::GeluTanh, 0.0), 0.0);
  EXPECT_EQ(applyUnary(UnaryKind::GeluErf, 0.0), 0.0);
}

TEST(ElementwiseTest, UnaryKeepsShapeAndDType) {
  Tensor x({2, 2}, DType::BF16, {1, 4, 9, 16});
  Tensor y = unary(UnaryKind::Sqrt, x);
  EXPECT_EQ(y.dtype(), DType::BF16);
  expectNear(y, {2, 2}, {1, 2, 3, 4});
}

TEST(ElementwiseTest, Binary) {
  Tensor a({3}, DType::F32, {1, 2, 3});
  Tensor b({3}, DType::F64, {4, 5, 6});
  Tensor sum = binary(BinaryKind::Add, a, b);
  EXPECT_EQ(sum.dtype(), DType::F32); // lhs's element type
  expectNear(sum, {3}, {5, 7, 9});
  expectNear(binary(BinaryKind::Sub, a, b), {3}, {-3, -3, -3});
  expectNear(binary(BinaryKind::Mul, a, b), {3}, {4, 10, 18});
  expectNear(binary(BinaryKind::Div, a, b), {3}, {0.25, 0.4, 0.5});
  expectNear(binary(BinaryKind::Max, a, Tensor({3}, DType::F32, {0, 5, 3})),
             {3}, {1, 5, 3});
  expectNear(binary(BinaryKind::Min, a, Tensor({3}, DType::F32, {0, 5, 3})),
             {3}, {0, 2, 3});
  expectNear(binary(BinaryKind::Pow, Tensor({2}, DType::F32, {2, 4}),
                    Tensor({2}, DType::F32, {3, 0.5})),
             {2}, {8, 2});
}

TEST(ElementwiseTest, BinarySpecialValues) {
  EXPECT_TRUE(std::isnan(applyBinary(BinaryKind::Max, kNaN, 1.0)));
  EXPECT_TRUE(std::isnan(applyBinary(BinaryKind::Max, 1.0, kNaN)));
  EXPECT_TRUE(std::isnan(applyBinary(BinaryKind::Min, 1.0, kNaN)));
  EXPECT_EQ(applyBinary(BinaryKind::Div, 1.0, 0.0),
            std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(applyBinary(BinaryKind::Div, 0.0, 0.0)));
}

TEST(ElementwiseTest, Compare) {
  Tensor a({4}, DType::F32, {1, 2, 3, kNaN});
  Tensor b({4}, DType::F32, {2, 2, 2, kNaN});
  Tensor lt = compare(CompareKind::LT, a, b);
  EXPECT_EQ(lt.dtype(), DType::I1);
  expectNear(lt, {4}, {1, 0, 0, 0});
  expectNear(compare(CompareKind::LE, a, b), {4}, {1, 1, 0, 0});
  expectNear(compare(CompareKind::GT, a, b), {4}, {0, 0, 1, 0});
  expectNear(compare(CompareKind::GE, a, b), {4}, {0, 1, 1, 0});
  expectNear(compare(CompareKind::EQ, a, b), {4}, {0, 1, 0, 0});
  expectNear(compare(CompareKind::NE, a, b), {4}, {1, 0, 1, 1});
}

TEST(ElementwiseTest, Select) {
  Tensor pred({3}, DType::I1, {1, 0, 1});
  Tensor t({3}, DType::BF16, {1, 2, 3});
  Tensor f({3}, DType::BF16, {-1, -2, -3});
  Tensor r = select(pred, t, f);
  EXPECT_EQ(r.dtype(), DType::BF16);
  expectNear(r, {3}, {1, -2, 3});
  expectNear(select(Tensor::scalar(0, DType::I1), t, f), {3}, {-1, -2, -3});
  expectNear(select(Tensor::scalar(1, DType::I1), t, f), {3}, {1, 2, 3});
}

TEST(ElementwiseTest, Convert) {
  Tensor x({3}, DType::F32, {0.0, 0.5, -3.0});
  Tensor b = convert(x, DType::I1);
  EXPECT_EQ(b.dtype(), DType::I1);
  expectNear(b, {3}, {0, 1, 1});
  // Float targets only retag: rounding is the evaluator driver's job.
  double v = 1.0 + std::ldexp(1.0, -8);
  Tensor h = convert(Tensor::scalar(v), DType::BF16);
  EXPECT_EQ(h.dtype(), DType::BF16);
  EXPECT_EQ(h[0], v);
  Tensor f = convert(b, DType::F32);
  EXPECT_EQ(f.dtype(), DType::F32);
  expectNear(f, {3}, {0, 1, 1});
}

TEST(ElementwiseTest, Iota) {
  Tensor cols = iota({2, 3}, 1, DType::F32);
  EXPECT_EQ(cols.dtype(), DType::F32);
  expectNear(cols, {2, 3}, {0, 1, 2, 0, 1, 2});
  expectNear(iota({2, 3}, 0, DType::F64), {2, 3}, {0, 0, 0, 1, 1, 1});
  expectNear(iota({2, 2, 2}, 1, DType::F32), {2, 2, 2},
             {0, 0, 1, 1, 0, 0, 1, 1});
}

TEST(ElementwiseTest, MseLoss) {
  Tensor pred({2, 2}, DType::BF16, {1, 2, 3, 4});
  Tensor target({2, 2}, DType::BF16, {1, 0, 3, 1});
  // Squared differences 0, 4, 0, 9: mean 13 / 4.
  Tensor loss = mseLoss(pred, target);
  EXPECT_EQ(loss.rank(), 0);
  EXPECT_EQ(loss.dtype(), DType::F32);
  EXPECT_EQ(loss[0], 3.25);
}

} // namespace
