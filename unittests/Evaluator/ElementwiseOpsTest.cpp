//===- ElementwiseOpsTest.cpp - elementwise ops through the IR ------------===//

#include "TestUtils.h"

#include "sd/IR/SDOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

using namespace sd::testing;

namespace {

class ElementwiseOpsTest : public EvaluatorTest {
protected:
  /// Replaces every sd.adamw of `source`'s @main by the ops
  /// AdamWOp::decompose writes, expects `converts` sd.convert ops among
  /// them, evaluates the result on `args` and expects it to match
  /// `expected` (of `shape` and `dtype`) within `tolerance`.
  void expectDecompositionMatches(llvm::StringRef source,
                                  const std::vector<Tensor> &args,
                                  const std::vector<Tensor> &expected,
                                  const std::vector<int64_t> &shape,
                                  DType dtype, double tolerance,
                                  int64_t converts) {
    mlir::OwningOpRef<mlir::ModuleOp> module = parse(source);
    ASSERT_TRUE(module) << diagnostics;
    mlir::func::FuncOp main = lookup(*module);
    mlir::OpBuilder builder(&context);
    for (auto update :
         llvm::make_early_inc_range(main.getOps<mlir::sd::AdamWOp>())) {
      std::array<mlir::Value, 3> values = update.decompose(builder);
      update->replaceAllUsesWith(mlir::ValueRange(values));
      update.erase();
    }
    EXPECT_TRUE(main.getOps<mlir::sd::AdamWOp>().empty());
    int64_t found = 0;
    main.walk([&](mlir::sd::ConvertOp) { ++found; });
    EXPECT_EQ(found, converts);
    std::string decomposed;
    llvm::raw_string_ostream os(decomposed);
    module->print(os);
    auto chain = run(decomposed, args);
    ASSERT_TRUE(mlir::succeeded(chain)) << diagnostics;
    ASSERT_EQ(chain->size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k)
      expectTensor((*chain)[k], shape, dtype, expected[k].values(), tolerance);
  }
};

/// Unary ops match their formulas (f32 rounding allows ~1e-7 relative).
TEST_F(ElementwiseOpsTest, UnaryOps) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>,
        tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
        tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %0 = sd.neg %x : tensor<3xf32>
      %1 = sd.exp %x : tensor<3xf32>
      %2 = sd.log %x : tensor<3xf32>
      %3 = sd.sqrt %x : tensor<3xf32>
      %4 = sd.rsqrt %x : tensor<3xf32>
      %5 = sd.tanh %x : tensor<3xf32>
      %6 = sd.sin %x : tensor<3xf32>
      %7 = sd.cos %x : tensor<3xf32>
      %8 = sd.sigmoid %x : tensor<3xf32>
      %9 = sd.silu %x : tensor<3xf32>
      return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<3xf32>,
          tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
          tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
          tensor<3xf32>
    }
  )mlir";
  std::vector<double> x = {0.5, 1.0, 4.0};
  auto results = run(program, {Tensor({3}, DType::F32, x)});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  ASSERT_EQ(results->size(), 10u);
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double (*)(double)> plain = {
      [](double v) { return -v; },
      [](double v) { return std::exp(v); },
      [](double v) { return std::log(v); },
      [](double v) { return std::sqrt(v); },
      [](double v) { return 1.0 / std::sqrt(v); },
      [](double v) { return std::tanh(v); },
      [](double v) { return std::sin(v); },
      [](double v) { return std::cos(v); }};
  for (size_t k = 0; k < plain.size(); ++k)
    expectTensor((*results)[k], {3}, DType::F32,
                 {plain[k](x[0]), plain[k](x[1]), plain[k](x[2])}, 1e-5);
  expectTensor((*results)[8], {3}, DType::F32,
               {sigmoid(0.5), sigmoid(1.0), sigmoid(4.0)}, 1e-6);
  expectTensor((*results)[9], {3}, DType::F32,
               {0.5 * sigmoid(0.5), sigmoid(1.0), 4.0 * sigmoid(4.0)}, 1e-6);
}

/// `approximate` defaults to the tanh form; `false` selects the erf form.
TEST_F(ElementwiseOpsTest, GeluApproximateAttribute) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
      %t = sd.gelu %x : tensor<2xf32>
      %e = sd.gelu %x {approximate = false} : tensor<2xf32>
      return %t, %e : tensor<2xf32>, tensor<2xf32>
    }
  )mlir";
  auto results = run(program, {Tensor({2}, DType::F32, {1.0, -2.0})},
                     {mlir::sd::Precision::F64});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  auto tanhGelu = [](double x) {
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  auto erfGelu = [](double x) {
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  };
  expectTensor((*results)[0], {2}, DType::F32, {tanhGelu(1.0), tanhGelu(-2.0)},
               1e-12);
  expectTensor((*results)[1], {2}, DType::F32, {erfGelu(1.0), erfGelu(-2.0)},
               1e-12);
  // The two forms differ (by ~4e-4 at 1.0), so the attribute mattered.
  EXPECT_GT(std::abs((*results)[0][0] - (*results)[1][0]), 1e-4);
}

TEST_F(ElementwiseOpsTest, BinaryOps) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> (
        tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>,
        tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
      %0 = sd.add %a, %b : tensor<2x2xf32>
      %1 = sd.sub %a, %b : tensor<2x2xf32>
      %2 = sd.mul %a, %b : tensor<2x2xf32>
      %3 = sd.div %a, %b : tensor<2x2xf32>
      %4 = sd.max %a, %b : tensor<2x2xf32>
      %5 = sd.min %a, %b : tensor<2x2xf32>
      %6 = sd.pow %a, %b : tensor<2x2xf32>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<2x2xf32>, tensor<2x2xf32>,
          tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>,
          tensor<2x2xf32>
    }
  )mlir";
  Tensor a({2, 2}, DType::F32, {1.0, -2.0, 3.0, 4.0});
  Tensor b({2, 2}, DType::F32, {2.0, 4.0, -1.0, 0.5});
  auto results = run(program, {a, b});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  ASSERT_EQ(results->size(), 7u);
  expectTensor((*results)[0], {2, 2}, DType::F32, {3, 2, 2, 4.5});
  expectTensor((*results)[1], {2, 2}, DType::F32, {-1, -6, 4, 3.5});
  expectTensor((*results)[2], {2, 2}, DType::F32, {2, -8, -3, 2});
  expectTensor((*results)[3], {2, 2}, DType::F32, {0.5, -0.5, -3, 8});
  expectTensor((*results)[4], {2, 2}, DType::F32, {2, 4, 3, 4});
  expectTensor((*results)[5], {2, 2}, DType::F32, {1, -2, -1, 0.5});
  expectTensor((*results)[6], {2, 2}, DType::F32, {1, 16, 1.0 / 3.0, 2});
}

/// Each direction reaches the kernel; the i1 result converts back to 0/1.
TEST_F(ElementwiseOpsTest, CompareDirections) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (
        tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
        tensor<3xf32>, tensor<3xf32>) {
      %eq = sd.compare eq, %a, %b : tensor<3xf32>
      %ne = sd.compare ne, %a, %b : tensor<3xf32>
      %lt = sd.compare lt, %a, %b : tensor<3xf32>
      %le = sd.compare le, %a, %b : tensor<3xf32>
      %gt = sd.compare gt, %a, %b : tensor<3xf32>
      %ge = sd.compare ge, %a, %b : tensor<3xf32>
      %0 = sd.convert %eq : tensor<3xi1> -> tensor<3xf32>
      %1 = sd.convert %ne : tensor<3xi1> -> tensor<3xf32>
      %2 = sd.convert %lt : tensor<3xi1> -> tensor<3xf32>
      %3 = sd.convert %le : tensor<3xi1> -> tensor<3xf32>
      %4 = sd.convert %gt : tensor<3xi1> -> tensor<3xf32>
      %5 = sd.convert %ge : tensor<3xi1> -> tensor<3xf32>
      return %0, %1, %2, %3, %4, %5 : tensor<3xf32>, tensor<3xf32>,
          tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    }
  )mlir";
  Tensor a({3}, DType::F32, {1.0, 2.0, 3.0});
  Tensor b({3}, DType::F32, {2.0, 2.0, 2.0});
  auto results = run(program, {a, b});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {3}, DType::F32, {0, 1, 0});
  expectTensor((*results)[1], {3}, DType::F32, {1, 0, 1});
  expectTensor((*results)[2], {3}, DType::F32, {1, 0, 0});
  expectTensor((*results)[3], {3}, DType::F32, {1, 1, 0});
  expectTensor((*results)[4], {3}, DType::F32, {0, 0, 1});
  expectTensor((*results)[5], {3}, DType::F32, {0, 1, 1});
}

TEST_F(ElementwiseOpsTest, SelectByPredicate) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
      %p = sd.compare gt, %a, %b : tensor<4xf32>
      %r = sd.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
      return %r : tensor<4xf32>
    }
  )mlir";
  Tensor r = runOne(program, {Tensor({4}, DType::F32, {1, 5, -3, 7}),
                              Tensor({4}, DType::F32, {2, 4, -4, 8})});
  expectTensor(r, {4}, DType::F32, {2, 5, -3, 8});
}

/// Both directions of f32 <-> bf16, with rounding to nearest even.
TEST_F(ElementwiseOpsTest, ConvertRoundsToTarget) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<3xf32>) -> (tensor<3xbf16>, tensor<3xf32>) {
      %h = sd.convert %x : tensor<3xf32> -> tensor<3xbf16>
      %f = sd.convert %h : tensor<3xbf16> -> tensor<3xf32>
      return %h, %f : tensor<3xbf16>, tensor<3xf32>
    }
  )mlir";
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even
  // give 1; 1 + 3*2^-9 rounds up; 3.0 is exact.
  Tensor x({3}, DType::F32,
           {1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -9), 3.0});
  auto results = run(program, {x});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  std::vector<double> expected = {1.0, 1.0 + std::ldexp(1.0, -7), 3.0};
  expectTensor((*results)[0], {3}, DType::BF16, expected, 0.0);
  expectTensor((*results)[1], {3}, DType::F32, expected, 0.0);
}

/// AdamW's update (sd.adamw): the formula, with and without weight decay,
/// and the elementwise ops `decompose` writes agree with it.
TEST_F(ElementwiseOpsTest, AdamW) {
  const char *program = R"mlir(
    func.func @main(%p: tensor<3xf32>, %g: tensor<3xf32>, %mu: tensor<3xf32>,
                    %nu: tensor<3xf32>, %lr: tensor<f32>, %c1: tensor<f32>,
                    %c2: tensor<f32>)
        -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %b1 = sd.constant dense<0.9> : tensor<f32>
      %omb1 = sd.constant dense<0.1> : tensor<f32>
      %b2 = sd.constant dense<0.999> : tensor<f32>
      %omb2 = sd.constant dense<0.001> : tensor<f32>
      %eps = sd.constant dense<1.0e-8> : tensor<f32>
      %wd = sd.constant dense<0.01> : tensor<f32>
      %p1, %mu1, %nu1 = sd.adamw %p, %g, %mu, %nu lr = %lr corrections = (%c1, %c2) beta1 = (%b1, %omb1) beta2 = (%b2, %omb2) eps = %eps weight_decay = %wd : tensor<3xf32>
      %q1, %m2, %v2 = sd.adamw %p, %g, %mu, %nu lr = %lr corrections = (%c1, %c2) beta1 = (%b1, %omb1) beta2 = (%b2, %omb2) eps = %eps : tensor<3xf32>
      return %p1, %mu1, %nu1, %q1 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    }
  )mlir";
  std::vector<double> p = {0.5, -1.0, 2.0}, g = {0.25, 3.0, -0.5},
                      mu = {0.1, -0.2, 0.0}, nu = {0.01, 0.5, 0.0};
  double lr = 1e-3, c1 = 1 - 0.9 * 0.9, c2 = 1 - 0.999 * 0.999;
  std::vector<Tensor> args = {
      Tensor({3}, DType::F32, p),  Tensor({3}, DType::F32, g),
      Tensor({3}, DType::F32, mu), Tensor({3}, DType::F32, nu),
      Tensor::scalar(lr),          Tensor::scalar(c1),
      Tensor::scalar(c2)};
  // The constants as f32 holds them.
  auto f32 = [](double v) { return double(float(v)); };
  std::vector<double> newP(3), newMu(3), newNu(3), undecayed(3);
  for (int i = 0; i < 3; ++i) {
    newMu[i] = f32(0.9) * mu[i] + f32(0.1) * g[i];
    newNu[i] = f32(0.999) * nu[i] + f32(0.001) * g[i] * g[i];
    double direction =
        (newMu[i] / f32(c1)) / (std::sqrt(newNu[i] / f32(c2)) + f32(1e-8));
    undecayed[i] = p[i] - f32(lr) * direction;
    newP[i] = p[i] - f32(lr) * (direction + f32(0.01) * p[i]);
  }
  auto results = run(program, args);
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  ASSERT_EQ(results->size(), 4u);
  expectTensor((*results)[0], {3}, DType::F32, newP, 1e-6);
  expectTensor((*results)[1], {3}, DType::F32, newMu, 1e-6);
  expectTensor((*results)[2], {3}, DType::F32, newNu, 1e-6);
  expectTensor((*results)[3], {3}, DType::F32, undecayed, 1e-6);

  // The decomposition, evaluated op by op (each result rounded to f32),
  // agrees to round-off; an f32 parameter needs no converts.
  expectDecompositionMatches(program, args, *results, {3}, DType::F32, 1e-6,
                             /*converts=*/0);
}

/// A bf16 parameter's update is rounded to bf16; its decomposition converts
/// the scalars and computes in bf16.
TEST_F(ElementwiseOpsTest, AdamWBF16) {
  const char *program = R"mlir(
    func.func @main(%p: tensor<2xbf16>, %g: tensor<2xbf16>, %s: tensor<f32>)
        -> (tensor<2xbf16>, tensor<2xbf16>, tensor<2xbf16>) {
      %one = sd.constant dense<1.0> : tensor<f32>
      %p1, %mu1, %nu1 = sd.adamw %p, %g, %g, %g lr = %s corrections = (%one, %one) beta1 = (%s, %s) beta2 = (%s, %s) eps = %s : tensor<2xbf16>
      return %p1, %mu1, %nu1 : tensor<2xbf16>, tensor<2xbf16>, tensor<2xbf16>
    }
  )mlir";
  std::vector<Tensor> args = {Tensor({2}, DType::BF16, {1.0, -2.0}),
                              Tensor({2}, DType::BF16, {0.5, 4.0}),
                              Tensor::scalar(0.5)};
  auto results = run(program, args);
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  // mu' = 0.5·g + 0.5·g = g, nu' = 0.5·g + 0.5·g² ,
  // p' = p − 0.5·(mu' / (sqrt(nu') + 0.5)).
  std::vector<double> g = {0.5, 4.0}, p = {1.0, -2.0}, newP(2), newNu(2);
  for (int i = 0; i < 2; ++i) {
    newNu[i] = 0.5 * g[i] + 0.5 * g[i] * g[i];
    newP[i] = ::sd::ref::roundTo(
        DType::BF16, p[i] - 0.5 * (g[i] / (std::sqrt(newNu[i]) + 0.5)));
  }
  expectTensor((*results)[0], {2}, DType::BF16, newP, 0.0);
  expectTensor((*results)[1], {2}, DType::BF16, g, 0.0);
  expectTensor((*results)[2], {2}, DType::BF16, newNu, 0.0);

  // Each scalar argument is converted to bf16 before it is broadcast (the
  // six reads of %s); the constant corrections become bf16 splats. Every
  // intermediate is rounded to bf16 there.
  expectDecompositionMatches(program, args, *results, {2}, DType::BF16, 1e-2,
                             /*converts=*/6);
}

} // namespace
