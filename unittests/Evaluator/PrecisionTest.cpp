//===- PrecisionTest.cpp - Native rounding vs F64 -------------------------===//

#include "TestUtils.h"

#include <cmath>

using namespace sd::testing;
using mlir::sd::EvalOptions;
using mlir::sd::Precision;

namespace {

class PrecisionTest : public EvaluatorTest {};

/// bf16 results are rounded to bf16 in Native mode and kept exact in F64.
TEST_F(PrecisionTest, Bf16ResultsRoundOnlyInNative) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<1xbf16>, %b: tensor<1xbf16>) -> tensor<1xbf16> {
      %s = sd.add %a, %b : tensor<1xbf16>
      return %s : tensor<1xbf16>
    }
  )mlir";
  // 1 + 2^-9 lies below the midpoint to the next bf16 (1 + 2^-7).
  Tensor a({1}, DType::BF16, {1.0});
  Tensor b({1}, DType::BF16, {std::ldexp(1.0, -9)});
  Tensor native = runOne(program, {a, b}, {Precision::Native});
  Tensor exact = runOne(program, {a, b}, {Precision::F64});
  expectTensor(native, {1}, DType::BF16, {1.0}, 0);
  expectTensor(exact, {1}, DType::BF16, {1.0 + std::ldexp(1.0, -9)}, 0);
}

/// f32 results are rounded to f32 in Native mode.
TEST_F(PrecisionTest, F32ResultsRoundInNative) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<1xf32>) -> tensor<1xf32> {
      %d = sd.constant dense<3.0> : tensor<1xf32>
      %q = sd.div %a, %d : tensor<1xf32>
      return %q : tensor<1xf32>
    }
  )mlir";
  Tensor a({1}, DType::F32, {1.0});
  Tensor native = runOne(program, {a}, {Precision::Native});
  Tensor exact = runOne(program, {a}, {Precision::F64});
  EXPECT_EQ(native[0], static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(exact[0], 1.0 / 3.0);
}

/// A bf16 product accumulated into an f32 result is tagged and rounded f32.
TEST_F(PrecisionTest, DotGeneralBf16ToF32) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<1x2xbf16>, %b: tensor<2x1xbf16>) -> tensor<1x1xf32> {
      %r = sd.dot_general %a, %b batch = [] x [] contract = [1] x [0] : (tensor<1x2xbf16>, tensor<2x1xbf16>) -> tensor<1x1xf32>
      return %r : tensor<1x1xf32>
    }
  )mlir";
  // 1 + 2^-9 would be lost in a bf16 result but is kept in f32.
  Tensor a({1, 2}, DType::BF16, {1.0, 1.0});
  Tensor b({2, 1}, DType::BF16, {1.0, std::ldexp(1.0, -9)});
  expectTensor(runOne(program, {a, b}), {1, 1}, DType::F32,
               {1.0 + std::ldexp(1.0, -9)}, 0);
}

/// In Native mode arguments are first rounded to their element type; in F64
/// they are used as given.
TEST_F(PrecisionTest, ArgumentsRoundInNative) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<1xbf16>) -> tensor<1xbf16> {
      %n = sd.neg %a : tensor<1xbf16>
      return %n : tensor<1xbf16>
    }
  )mlir";
  Tensor a({1}, DType::BF16, {1.0 + std::ldexp(1.0, -9)});
  expectTensor(runOne(program, {a}, {Precision::Native}), {1}, DType::BF16,
               {-1.0}, 0);
  expectTensor(runOne(program, {a}, {Precision::F64}), {1}, DType::BF16,
               {-1.0 - std::ldexp(1.0, -9)}, 0);
  // The caller's tensor is untouched.
  EXPECT_EQ(a[0], 1.0 + std::ldexp(1.0, -9));
}

} // namespace
