//===- CallTest.cpp - func.call, returns, deep programs, devices ----------===//

#include "TestUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>
#include <string>

using namespace sd::testing;

namespace {

class CallTest : public EvaluatorTest {};

/// A block function called twice with different weights, as a model's layers.
TEST_F(CallTest, BlockFunctionCalls) {
  const char *program = R"mlir(
    func.func private @block(%x: tensor<1x2xf32>, %w: tensor<2x2xf32>) -> tensor<1x2xf32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      %z = sd.add %y, %x : tensor<1x2xf32>
      return %z : tensor<1x2xf32>
    }
    func.func @main(%x: tensor<1x2xf32>, %w0: tensor<2x2xf32>, %w1: tensor<2x2xf32>) -> tensor<1x2xf32> {
      %h0 = call @block(%x, %w0) : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      %h1 = call @block(%h0, %w1) : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      return %h1 : tensor<1x2xf32>
    }
  )mlir";
  // h0 = [1, 2] [[0, 1], [1, 0]] + [1, 2] = [3, 3];
  // h1 = [3, 3] [[2, 0], [0, 2]] + [3, 3] = [9, 9].
  Tensor r = runOne(program, {Tensor({1, 2}, DType::F32, {1, 2}),
                              Tensor({2, 2}, DType::F32, {0, 1, 1, 0}),
                              Tensor({2, 2}, DType::F32, {2, 0, 0, 2})});
  expectTensor(r, {1, 2}, DType::F32, {9, 9});
}

/// Returning an argument, and the same value twice, copies rather than
/// moving a tensor away from under another use.
TEST_F(CallTest, ReturnArgumentAndDuplicates) {
  const char *program = R"mlir(
    func.func private @pass(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
      %e = sd.neg %x : tensor<2xf32>
      return %x, %e : tensor<2xf32>, tensor<2xf32>
    }
    func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
      %a, %b = call @pass(%x) : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
      return %a, %b, %b, %x : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
    }
  )mlir";
  auto results = run(program, {Tensor({2}, DType::F32, {1, -3})});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {2}, DType::F32, {1, -3});
  expectTensor((*results)[1], {2}, DType::F32, {-1, 3});
  expectTensor((*results)[2], {2}, DType::F32, {-1, 3});
  expectTensor((*results)[3], {2}, DType::F32, {1, -3});
}

/// 200 calls of a block, each a chain of ops: evaluation is iterative along
/// use-def chains, so depth is no problem; values freed after their last use
/// do not break later reads (x is read by every layer).
TEST_F(CallTest, DeepProgram) {
  std::string program = R"mlir(
    func.func private @layer(%h: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
      %a = sd.add %h, %x : tensor<4xf32>
      %b = sd.mul %a, %a : tensor<4xf32>
      %c = sd.sqrt %b : tensor<4xf32>
      %d = sd.sub %c, %h : tensor<4xf32>
      %e = sd.add %d, %h : tensor<4xf32>
      return %e : tensor<4xf32>
    }
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %h0 = sd.neg %x : tensor<4xf32>
)mlir";
  // Each layer computes |h + x| = h + x for non-negative inputs.
  const int kLayers = 200;
  for (int i = 0; i < kLayers; ++i)
    program += "      %h" + std::to_string(i + 1) + " = call @layer(%h" +
               std::to_string(i) +
               ", %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n";
  program +=
      "      return %h" + std::to_string(kLayers) + " : tensor<4xf32>\n    }\n";
  // h0 = -x, h1 = |0| = 0, then h_i = (i - 1) x.
  Tensor r = runOne(program, {Tensor({4}, DType::F32, {0, 1, 2, 0.5})});
  double n = kLayers - 1;
  expectTensor(r, {4}, DType::F32, {0, n, 2 * n, 0.5 * n});
}

/// A chain of 61 ops on 1000-element tensors, 40 of them inside calls, holds
/// at most three tensors at once (the call's operand, which the caller keeps
/// during the call, and an op's operand and result in the callee): every
/// value is freed right after its last use (kept, they would peak at 61000
/// elements).
TEST_F(CallTest, FreesValuesAfterLastUse) {
  std::string program = R"mlir(
    func.func private @twice(%h: tensor<1000xf32>) -> tensor<1000xf32> {
      %a = sd.neg %h : tensor<1000xf32>
      %b = sd.neg %a : tensor<1000xf32>
      return %b : tensor<1000xf32>
    }
    func.func @main(%x: tensor<1000xf32>) -> tensor<1000xf32> {
      %h0 = sd.neg %x : tensor<1000xf32>
)mlir";
  for (int i = 1; i <= 20; ++i) {
    std::string prev = "%h" + std::to_string(i - 1);
    std::string cur = "%h" + std::to_string(i);
    program += "      " + cur + "a = sd.sin " + prev + " : tensor<1000xf32>\n";
    program += "      " + cur + " = call @twice(" + cur +
               "a) : (tensor<1000xf32>) -> tensor<1000xf32>\n";
  }
  program += "      return %h20 : tensor<1000xf32>\n    }\n";
  auto module = parse(program);
  ASSERT_TRUE(module) << diagnostics;
  mlir::sd::Evaluator evaluator({});
  std::vector<std::vector<Tensor>> args = {{Tensor({1000}, DType::F32, 0.0)}};
  auto results = evaluator.run(lookup(*module), args);
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  EXPECT_EQ(evaluator.getPeakLiveElements(), 3000);
  EXPECT_TRUE(std::isfinite((*results)[0][0][0]));
}

/// Each simulated device evaluates the program on its own arguments.
TEST_F(CallTest, PerDeviceEvaluation) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2xf32>) -> tensor<f32> {
      %s = sd.reduce_sum %x dims = [0] : (tensor<2xf32>) -> tensor<f32>
      return %s : tensor<f32>
    }
  )mlir";
  auto module = parse(program);
  ASSERT_TRUE(module) << diagnostics;
  mlir::sd::EvalOptions options;
  options.numDevices = 2;
  mlir::sd::PerDeviceTensors args = {{Tensor({2}, DType::F32, {1, 2})},
                                     {Tensor({2}, DType::F32, {10, 20})}};
  auto results = mlir::sd::evaluatePerDevice(lookup(*module), args, options);
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  ASSERT_EQ(results->size(), 2u);
  expectTensor((*results)[0][0], {}, DType::F32, {3});
  expectTensor((*results)[1][0], {}, DType::F32, {30});
}

} // namespace
