//===- ErrorsTest.cpp - bad programs and bad arguments get diagnostics ----===//

#include "TestUtils.h"

#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/IR/SDOps.h"

using namespace sd::testing;

namespace {

class ErrorsTest : public EvaluatorTest {
protected:
  /// Expects evaluating `source` with `args` to fail with `message`.
  void expectError(llvm::StringRef source, const std::vector<Tensor> &args,
                   llvm::StringRef message,
                   mlir::sd::EvalOptions options = {}) {
    auto results = run(source, args, options);
    EXPECT_TRUE(mlir::failed(results));
    EXPECT_NE(diagnostics.find(message.str()), std::string::npos)
        << "expected \"" << message.str() << "\" in:\n"
        << diagnostics;
  }
};

const char *kNeg = R"mlir(
  func.func @main(%x: tensor<2xf32>, %w: tensor<2xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<2xf32> {
    %y = sd.add %x, %w : tensor<2xf32>
    return %y : tensor<2xf32>
  }
)mlir";

TEST_F(ErrorsTest, DynamicShape) {
  expectError(R"mlir(
    func.func @main(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
      %y = sd.neg %x : tensor<?x2xf32>
      return %y : tensor<?x2xf32>
    }
  )mlir",
              {Tensor({2, 2}, DType::F32, 0.0)},
              "argument #0 has dynamic type 'tensor<?x2xf32>'; run "
              "sd-specialize-batch first");
}

TEST_F(ErrorsTest, WrongArgumentCount) {
  expectError(kNeg, {Tensor({2}, DType::F32, 0.0)},
              "@main expects 2 arguments, got 1");
}

TEST_F(ErrorsTest, WrongArgumentShapeNamesTheArgument) {
  expectError(kNeg,
              {Tensor({2}, DType::F32, 0.0), Tensor({3}, DType::F32, 0.0)},
              "argument #1 (\"w\") has type 'tensor<2xf32>' but the given "
              "tensor is [3] of f32");
}

TEST_F(ErrorsTest, WrongArgumentElementType) {
  expectError(kNeg,
              {Tensor({2}, DType::BF16, 0.0), Tensor({2}, DType::F32, 0.0)},
              "argument #0 has type 'tensor<2xf32>' but the given tensor is "
              "[2] of bf16");
}

TEST_F(ErrorsTest, MissingArgumentValue) {
  expectError(kNeg, {Tensor(), Tensor({2}, DType::F32, 0.0)},
              "argument #0 has no value");
}

TEST_F(ErrorsTest, RecursiveCall) {
  expectError(R"mlir(
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = call @main(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %y : tensor<2xf32>
    }
  )mlir",
              {Tensor({2}, DType::F32, 0.0)},
              "calls @main recursively, which the reference evaluator does "
              "not support");
}

TEST_F(ErrorsTest, SingleDeviceEntryRejectsSeveralDevices) {
  mlir::sd::EvalOptions options;
  options.numDevices = 2;
  expectError(kNeg, {}, "evaluate runs on one device, not 2", options);
}

/// Every sd op that can appear in a function body has a reference
/// evaluation, so the oracle covers the whole dialect: exactly one of the
/// per-device interface and the all-devices one (collectives).
TEST_F(ErrorsTest, EveryComputeOpIsEvaluable) {
  int64_t numOps = 0, numCollectives = 0;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "sd" || name.getStringRef() == "sd.mesh")
      continue;
    ++numOps;
    bool perDevice = name.hasInterface<mlir::sd::EvaluableOpInterface>();
    bool collective =
        name.hasInterface<mlir::sd::CollectiveEvaluableOpInterface>();
    numCollectives += collective;
    EXPECT_TRUE(perDevice || collective)
        << name.getStringRef().str() << " has no reference evaluation";
    EXPECT_FALSE(perDevice && collective)
        << name.getStringRef().str() << " has two reference evaluations";
  }
  EXPECT_GE(numOps, 51);
  // The six collectives, a permute's start and sd.axis_index, whose value
  // depends on the device.
  EXPECT_EQ(numCollectives, 8);
}

/// registerAllSDExtensions gives every op of a global program its
/// partitioning, and every op with a float operand its VJP: all but the
/// mesh and the ops of partitioned programs (collectives, axis_index, a
/// permute's done), and
/// for partitioning the reshards (sd-partition turns them into collectives)
/// or for VJPs the sources without operands (constant, iota) and the
/// optimizer's update, which the training step makes after differentiation.
TEST_F(ErrorsTest, EveryGlobalOpHasItsPartitioningAndVjp) {
  int64_t numPartitioned = 0, numDifferentiable = 0;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    llvm::StringRef op = name.getStringRef();
    if (name.getDialectNamespace() != "sd" || op == "sd.mesh" ||
        op == "sd.collective_permute_done" ||
        name.hasInterface<mlir::sd::CollectiveEvaluableOpInterface>())
      continue;
    bool partitioned = name.hasInterface<mlir::sd::PartitionOpInterface>();
    bool differentiable = name.hasInterface<mlir::sd::VjpOpInterface>();
    numPartitioned += partitioned;
    numDifferentiable += differentiable;
    EXPECT_EQ(partitioned, op != "sd.reshard") << op.str();
    // The tiled attention backward is itself a VJP: sd differentiates once.
    EXPECT_EQ(differentiable, op != "sd.constant" && op != "sd.iota" &&
                                  op != "sd.flash_attention_dq" &&
                                  op != "sd.flash_attention_dkv" &&
                                  op != "sd.adamw")
        << op.str();
  }
  EXPECT_EQ(numPartitioned, 53);
  EXPECT_EQ(numDifferentiable, 49);
}

/// Without the evaluator's interfaces no op can be evaluated, and the
/// evaluator says so instead of guessing.
class NoInterfacesTest : public EvaluatorTest {
protected:
  NoInterfacesTest() : EvaluatorTest(/*withInterfaces=*/false) {}
};

TEST_F(NoInterfacesTest, OpWithoutInterface) {
  auto results =
      run(kNeg, {Tensor({2}, DType::F32, 0.0), Tensor({2}, DType::F32, 0.0)});
  EXPECT_TRUE(mlir::failed(results));
  EXPECT_NE(diagnostics.find("'sd.add' op has no reference evaluation"),
            std::string::npos)
      << diagnostics;
}

} // namespace
