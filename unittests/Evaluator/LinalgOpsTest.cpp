//===- LinalgOpsTest.cpp - dot_general, norms, attention, conv ------------===//

#include "TestUtils.h"

#include <cmath>

using namespace sd::testing;
using mlir::sd::Precision;

namespace {

class LinalgOpsTest : public EvaluatorTest {};

constexpr double kEps = 1e-6; // the norms' default epsilon

TEST_F(LinalgOpsTest, DotGeneralContractingDims) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %y: tensor<2x2xf32>)
        -> (tensor<2x2xf32>, tensor<3x2xf32>) {
      %p = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      %t = sd.dot_general %x, %y batch = [] x [] contract = [0] x [0] : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
      return %p, %t : tensor<2x2xf32>, tensor<3x2xf32>
    }
  )mlir";
  Tensor x({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  Tensor w({3, 2}, DType::F32, {1, 0, 0, 1, 1, 1});
  Tensor y({2, 2}, DType::F32, {1, 0, 0, 1});
  auto results = run(program, {x, w, y});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {2, 2}, DType::F32, {4, 5, 10, 11});
  // Contracting dimension 0 of x computes x^T y.
  expectTensor((*results)[1], {3, 2}, DType::F32, {1, 4, 2, 5, 3, 6});
}

TEST_F(LinalgOpsTest, DotGeneralBatchDims) {
  const char *program = R"mlir(
    func.func @main(%a: tensor<2x1x2xf32>, %b: tensor<2x2x1xf32>) -> tensor<2x1x1xf32> {
      %r = sd.dot_general %a, %b batch = [0] x [0] contract = [2] x [1] : (tensor<2x1x2xf32>, tensor<2x2x1xf32>) -> tensor<2x1x1xf32>
      return %r : tensor<2x1x1xf32>
    }
  )mlir";
  Tensor r = runOne(program, {Tensor({2, 1, 2}, DType::F32, {1, 2, 5, 6}),
                              Tensor({2, 2, 1}, DType::F32, {3, 4, 7, 8})});
  expectTensor(r, {2, 1, 1}, DType::F32, {11, 83});
}

/// Scale and bias are each optional; with only a bias present it must not be
/// taken for the scale.
TEST_F(LinalgOpsTest, LayerNormOptionalScaleBias) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x4xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>)
        -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) {
      %0 = sd.layer_norm %x : (tensor<1x4xf32>) -> tensor<1x4xf32>
      %1 = sd.layer_norm %x scale %s bias %b : (tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
      %2 = sd.layer_norm %x bias %b : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
      %3 = sd.layer_norm %x {epsilon = 0.75 : f64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
      return %0, %1, %2, %3 : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>
    }
  )mlir";
  Tensor x({1, 4}, DType::F32, {1, 2, 3, 4});
  Tensor scale({4}, DType::F32, {1, 2, 1, 2});
  Tensor bias({4}, DType::F32, {0, 0, 1, 1});
  auto results = run(program, {x, scale, bias}, {Precision::F64});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  // mean 2.5, biased variance 1.25.
  double inv = 1 / std::sqrt(1.25 + kEps);
  std::vector<double> n = {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv};
  expectTensor((*results)[0], {1, 4}, DType::F32, n, 1e-12);
  expectTensor((*results)[1], {1, 4}, DType::F32,
               {n[0], 2 * n[1], n[2] + 1, 2 * n[3] + 1}, 1e-12);
  expectTensor((*results)[2], {1, 4}, DType::F32,
               {n[0], n[1], n[2] + 1, n[3] + 1}, 1e-12);
  double inv2 = 1 / std::sqrt(1.25 + 0.75);
  expectTensor((*results)[3], {1, 4}, DType::F32,
               {-1.5 * inv2, -0.5 * inv2, 0.5 * inv2, 1.5 * inv2}, 1e-12);
}

TEST_F(LinalgOpsTest, RmsNormWithAndWithoutScale) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x2xf32>, %s: tensor<2xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>) {
      %0 = sd.rms_norm %x : (tensor<1x2xf32>) -> tensor<1x2xf32>
      %1 = sd.rms_norm %x scale %s : (tensor<1x2xf32>, tensor<2xf32>) -> tensor<1x2xf32>
      return %0, %1 : tensor<1x2xf32>, tensor<1x2xf32>
    }
  )mlir";
  auto results = run(
      program,
      {Tensor({1, 2}, DType::F32, {3, 4}), Tensor({2}, DType::F32, {2, 0.5})},
      {Precision::F64});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  double inv = 1 / std::sqrt(12.5 + kEps); // mean(x^2) = 12.5
  expectTensor((*results)[0], {1, 2}, DType::F32, {3 * inv, 4 * inv}, 1e-12);
  expectTensor((*results)[1], {1, 2}, DType::F32, {6 * inv, 2 * inv}, 1e-12);
}

/// Two groups of two channels over a [1, 2, 4] sequence, with per-channel
/// scale and bias.
TEST_F(LinalgOpsTest, GroupNormGroups) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x2x4xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1x2x4xf32> {
      %0 = sd.group_norm %x scale %s bias %b groups = 2 : (tensor<1x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
      return %0 : tensor<1x2x4xf32>
    }
  )mlir";
  Tensor x({1, 2, 4}, DType::F32, {1, 2, 10, 20, 3, 4, 30, 40});
  Tensor r = runOne(program,
                    {x, Tensor({4}, DType::F32, {1, 1, 2, 2}),
                     Tensor({4}, DType::F32, {0, 1, 0, 1})},
                    {Precision::F64});
  // Group 0 holds {1, 2, 3, 4} (mean 2.5, variance 1.25), group 1
  // {10, 20, 30, 40} (mean 25, variance 125).
  double a = 1 / std::sqrt(1.25 + kEps), b = 1 / std::sqrt(125 + kEps);
  expectTensor(r, {1, 2, 4}, DType::F32,
               {-1.5 * a, -0.5 * a + 1, 2 * -15 * b, 2 * -5 * b + 1, 0.5 * a,
                1.5 * a + 1, 2 * 5 * b, 2 * 15 * b + 1},
               1e-12);
}

TEST_F(LinalgOpsTest, SoftmaxDim) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
      %r = sd.softmax %x dim = 1 : tensor<2x2xf32>
      %c = sd.softmax %x dim = 0 : tensor<2x2xf32>
      return %r, %c : tensor<2x2xf32>, tensor<2x2xf32>
    }
  )mlir";
  auto results = run(program, {Tensor({2, 2}, DType::F32, {0, 1, 2, 3})},
                     {Precision::F64});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  double e = std::exp(1.0), e2 = std::exp(2.0);
  double p = 1 / (1 + e), q = 1 / (1 + e2);
  expectTensor((*results)[0], {2, 2}, DType::F32, {p, 1 - p, p, 1 - p}, 1e-12);
  expectTensor((*results)[1], {2, 2}, DType::F32, {q, q, 1 - q, 1 - q}, 1e-12);
}

/// Default scale 1/sqrt(D) = 1/2, an explicit scale, and a causal mask
/// built in the IR from iota and compare.
TEST_F(LinalgOpsTest, AttentionScaleAndMask) {
  const char *program = R"mlir(
    func.func @main(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x2xf32>)
        -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
      %d = sd.attention %q, %k, %v : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      %s = sd.attention %q, %k, %v scale = 1.0 : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      %row = sd.iota dim = 2 : tensor<1x1x2x2xf32>
      %col = sd.iota dim = 3 : tensor<1x1x2x2xf32>
      %causal = sd.compare ge, %row, %col : tensor<1x1x2x2xf32>
      %m = sd.attention %q, %k, %v mask %causal : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xi1>) -> tensor<1x1x2x2xf32>
      return %d, %s, %m : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
    }
  )mlir";
  Tensor q({1, 1, 2, 4}, DType::F32, {1, 0, 0, 0, 0, 1, 0, 0});
  Tensor k({1, 1, 2, 4}, DType::F32, {2, 0, 0, 0, 0, 2, 0, 0});
  Tensor v({1, 1, 2, 2}, DType::F32, {1, 2, 3, 4});
  auto results = run(program, {q, k, v}, {Precision::F64});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  // q k^T = [[2, 0], [0, 2]]; a row with logits (s, 0) weighs the values
  // with w = e^s / (1 + e^s) and 1 - w.
  auto mix = [](double w0) {
    return std::vector<double>{w0 * 1 + (1 - w0) * 3, w0 * 2 + (1 - w0) * 4};
  };
  auto row = [&](double s, bool first) {
    double w = std::exp(s) / (1 + std::exp(s));
    return mix(first ? w : 1 - w);
  };
  auto concat = [](std::vector<double> a, const std::vector<double> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  expectTensor((*results)[0], {1, 1, 2, 2}, DType::F32,
               concat(row(1.0, true), row(1.0, false)), 1e-12);
  expectTensor((*results)[1], {1, 1, 2, 2}, DType::F32,
               concat(row(2.0, true), row(2.0, false)), 1e-12);
  // Query 0 sees only key 0.
  expectTensor((*results)[2], {1, 1, 2, 2}, DType::F32,
               concat({1, 2}, row(1.0, false)), 1e-12);
}

/// Strides and padding [top, bottom, left, right] with a bias.
TEST_F(LinalgOpsTest, Conv2DStridesPaddingBias) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x3x3x1xf32>, %w: tensor<2x2x1x1xf32>, %b: tensor<1xf32>)
        -> (tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) {
      %0 = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<1x3x3x1xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x1xf32>
      %1 = sd.conv2d %x, %w bias %b strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<1x3x3x1xf32>, tensor<2x2x1x1xf32>, tensor<1xf32>) -> tensor<1x2x2x1xf32>
      return %0, %1 : tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>
    }
  )mlir";
  Tensor x({1, 3, 3, 1}, DType::F32, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto results = run(program, {x, Tensor({2, 2, 1, 1}, DType::F32, 1.0),
                               Tensor({1}, DType::F32, 0.5)});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {1, 2, 2, 1}, DType::F32, {12, 16, 24, 28});
  expectTensor((*results)[1], {1, 2, 2, 1}, DType::F32, {1.5, 5.5, 11.5, 28.5});
}

/// With two groups each output channel reads only its own input channel.
TEST_F(LinalgOpsTest, Conv2DGroups) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x1x1x2xf32>, %w: tensor<1x1x1x2xf32>) -> tensor<1x1x1x2xf32> {
      %0 = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 2 : (tensor<1x1x1x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x1x1x2xf32>
      return %0 : tensor<1x1x1x2xf32>
    }
  )mlir";
  Tensor r = runOne(program, {Tensor({1, 1, 1, 2}, DType::F32, {1, 2}),
                              Tensor({1, 1, 1, 2}, DType::F32, {3, 5})});
  expectTensor(r, {1, 1, 1, 2}, DType::F32, {3, 10});
}

TEST_F(LinalgOpsTest, UpsampleNearestScale) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x1x2x1xf32>) -> tensor<1x2x4x1xf32> {
      %0 = sd.upsample_nearest %x scale = [2, 2] : (tensor<1x1x2x1xf32>) -> tensor<1x2x4x1xf32>
      return %0 : tensor<1x2x4x1xf32>
    }
  )mlir";
  expectTensor(runOne(program, {Tensor({1, 1, 2, 1}, DType::F32, {1, 2})}),
               {1, 2, 4, 1}, DType::F32, {1, 1, 2, 2, 1, 1, 2, 2});
}

TEST_F(LinalgOpsTest, MseLoss) {
  const char *program = R"mlir(
    func.func @main(%p: tensor<3xf32>, %t: tensor<3xf32>) -> tensor<f32> {
      %l = sd.mse_loss %p, %t : tensor<3xf32>
      return %l : tensor<f32>
    }
  )mlir";
  Tensor r = runOne(program, {Tensor({3}, DType::F32, {1, 2, 3}),
                              Tensor({3}, DType::F32, {1, 0, 0})});
  expectTensor(r, {}, DType::F32, {static_cast<float>(13.0 / 3.0)}, 0);
}

} // namespace
