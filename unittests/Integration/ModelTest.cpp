//===- ModelTest.cpp - whole models end to end ----------------------------===//
//
// The path every numerical test of a model takes: parse, fix the batch with
// sd-specialize-batch, initialize the arguments from their roles, evaluate.
// The loss must be finite, positive and bitwise reproducible. Runs on a
// small inline model, and on models/dit_tiny.mlir (written by sdgen) once it
// is checked in.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"

#include <cmath>
#include <cstdlib>

using namespace sd::testing;

namespace {

class ModelTest : public EvaluatorTest {
protected:
  /// Specializes `module` to batch 2 when its entry has a dynamic batch,
  /// then checks the loss as described above and against F64 evaluation.
  void checkLoss(mlir::ModuleOp module);
};

/// The entry function: @loss, else the last public function.
mlir::func::FuncOp entryFunction(mlir::ModuleOp module) {
  if (auto loss = module.lookupSymbol<mlir::func::FuncOp>("loss"))
    return loss;
  mlir::func::FuncOp entry;
  for (auto func : module.getOps<mlir::func::FuncOp>())
    if (func.isPublic())
      entry = func;
  return entry;
}

bool hasDynamicArgument(mlir::func::FuncOp func) {
  return llvm::any_of(func.getArgumentTypes(), [](mlir::Type type) {
    auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
    return tensor && !tensor.hasStaticShape();
  });
}

void ModelTest::checkLoss(mlir::ModuleOp module) {
  mlir::func::FuncOp loss = entryFunction(module);
  ASSERT_TRUE(loss) << "no entry function";
  if (hasDynamicArgument(loss)) {
    mlir::PassManager pm(&context);
    mlir::sd::SpecializeBatchOptions options;
    options.batch = 2;
    pm.addPass(mlir::sd::createSpecializeBatch(options));
    ASSERT_TRUE(mlir::succeeded(pm.run(module))) << diagnostics;
    loss = entryFunction(module);
    ASSERT_FALSE(hasDynamicArgument(loss));
  }

  auto args = mlir::sd::initializeArguments(loss, /*seed=*/0);
  ASSERT_TRUE(mlir::succeeded(args)) << diagnostics;
  auto first = mlir::sd::evaluate(loss, *args);
  auto second = mlir::sd::evaluate(loss, *args);
  ASSERT_TRUE(mlir::succeeded(first) && mlir::succeeded(second)) << diagnostics;
  ASSERT_FALSE(first->empty());
  const Tensor &value = first->front();
  ASSERT_EQ(value.numElements(), 1);
  EXPECT_TRUE(std::isfinite(value[0])) << value.toString();
  EXPECT_GT(value[0], 0.0);
  EXPECT_EQ(value[0], second->front()[0]);

  // f32 rounding moves the loss only slightly from the exact (F64) value.
  auto exact = mlir::sd::evaluate(loss, *args, {mlir::sd::Precision::F64});
  ASSERT_TRUE(mlir::succeeded(exact)) << diagnostics;
  EXPECT_NEAR(value[0], exact->front()[0], 1e-4 * exact->front()[0]);
  EXPECT_NE(value[0], exact->front()[0]);

  // A second initialization gives the same loss bit for bit.
  auto again = mlir::sd::initializeArguments(loss, /*seed=*/0);
  ASSERT_TRUE(mlir::succeeded(again)) << diagnostics;
  auto third = mlir::sd::evaluate(loss, *again);
  ASSERT_TRUE(mlir::succeeded(third)) << diagnostics;
  EXPECT_EQ(value[0], third->front()[0]);
}

/// Two residual MLP blocks through one block function, batch left dynamic.
TEST_F(ModelTest, SmallModelWithDynamicBatch) {
  const char *program = R"mlir(
    func.func private @block(%h: tensor<?x8xf32>, %w: tensor<8x8xf32>, %s: tensor<8xf32>) -> tensor<?x8xf32> {
      %n = sd.layer_norm %h scale %s : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
      %p = sd.dot_general %n, %w batch = [] x [] contract = [1] x [0] : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
      %g = sd.gelu %p : tensor<?x8xf32>
      %r = sd.add %g, %h : tensor<?x8xf32>
      return %r : tensor<?x8xf32>
    }
    func.func @loss(
        %w0: tensor<8x8xf32> {sd.role = #sd.param<"blocks.0.w", xavier_uniform>},
        %s0: tensor<8xf32> {sd.role = #sd.param<"blocks.0.scale", ones>},
        %w1: tensor<8x8xf32> {sd.role = #sd.param<"blocks.1.w", xavier_uniform>},
        %s1: tensor<8xf32> {sd.role = #sd.param<"blocks.1.scale", ones>},
        %x: tensor<?x8xf32> {sd.role = #sd.input<latents>},
        %e: tensor<?x8xf32> {sd.role = #sd.input<noise>}) -> tensor<f32>
        attributes {sd.default_batch = 4 : i64} {
      %xt = sd.add %x, %e : tensor<?x8xf32>
      %h0 = call @block(%xt, %w0, %s0) : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
      %h1 = call @block(%h0, %w1, %s1) : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
      %l = sd.mse_loss %h1, %e : tensor<?x8xf32>
      return %l : tensor<f32>
    }
  )mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(program);
  ASSERT_TRUE(module) << diagnostics;
  checkLoss(*module);
  EXPECT_EQ(
      lookup(*module, "loss").getArgumentTypes()[4],
      mlir::RankedTensorType::get({2, 8}, mlir::Float32Type::get(&context)));
}

TEST_F(ModelTest, DitTinyLossIsFiniteAndReproducible) {
  // SD_MODELS_DIR in the environment points the test at other models.
  const char *dir = std::getenv("SD_MODELS_DIR");
  std::string path = std::string(dir ? dir : SD_MODELS_DIR) + "/dit_tiny.mlir";
  if (!llvm::sys::fs::exists(path))
    GTEST_SKIP() << path << " does not exist yet";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(path, &context);
  ASSERT_TRUE(module) << diagnostics;
  checkLoss(*module);
}

} // namespace
