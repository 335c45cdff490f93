//===- ManyArgumentsTest.cpp - passes on functions with many arguments ----===//
//
// The passes that rewrite a function's signature must stay linear in its
// argument count. Updating one argument's or result's attribute at a time
// rebuilds the whole attribute array each time: with 20,000 parameters the
// training step (60,001 results) then took gigabytes and ran out of memory.
// These programs are generated here:
// * @loss with 20,000 parameters, through sd-differentiate and
//   sd-build-train-step: each result of @train_step aliases its argument;
// * a function returning its 20,000 sharded arguments, through
//   sd-propagate-sharding and sd-partition: every argument and result gets
//   its local sharding.
// Each takes well under a second; the quadratic versions did not finish.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace mlir::sd;

namespace {

constexpr int kNumParams = 20000;

class ManyArgumentsTest : public ::testing::Test {
protected:
  ManyArgumentsTest() {
    context.loadDialect<SDDialect, func::FuncDialect>();
    // Diagnostics go into `diagnostics`, for the failure messages.
    context.getDiagEngine().registerHandler(
        [this](Diagnostic &diag) { diagnostics += diag.str() + "\n"; });
  }

  /// Parses `source` and runs `build`'s passes on it; null after an error.
  OwningOpRef<ModuleOp> run(const std::string &source,
                            function_ref<void(PassManager &)> build) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    if (!module)
      return {};
    PassManager pm(&context);
    build(pm);
    if (failed(pm.run(*module)))
      return {};
    return module;
  }

  MLIRContext context;
  std::string diagnostics;
};

/// @loss(p0, ..., p<n-1>, x): x + broadcast(p0) + ... + broadcast(p<n-1>),
/// averaged: every parameter gets a gradient.
std::string manyParameters(int n) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "func.func @loss(";
  for (int i = 0; i < n; ++i)
    os << "%p" << i << ": tensor<4xf32> {sd.role = #sd.param<\"p" << i
       << "\", zeros>}, ";
  os << "%x: tensor<2x4xf32> {sd.role = #sd.input<latents>}) -> "
        "tensor<f32> {\n";
  std::string previous = "%x";
  for (int i = 0; i < n; ++i) {
    os << "  %b" << i << " = sd.broadcast_in_dim %p" << i
       << " dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>\n";
    os << "  %h" << i << " = sd.add " << previous << ", %b" << i
       << " : tensor<2x4xf32>\n";
    previous = "%h" + std::to_string(i);
  }
  os << "  %l = sd.reduce_mean " << previous
     << " dims = [0, 1] : (tensor<2x4xf32>) -> tensor<f32>\n";
  os << "  return %l : tensor<f32>\n}\n";
  return text;
}

TEST_F(ManyArgumentsTest, TrainStepOfManyParameters) {
  OwningOpRef<ModuleOp> module =
      run(manyParameters(kNumParams), [](PassManager &pm) {
        pm.addPass(createDifferentiate());
        pm.addPass(createBuildTrainStep());
      });
  ASSERT_TRUE(module) << diagnostics;
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  ASSERT_TRUE(step);
  // (params, mu, nu, x, step) -> (loss, params', mu', nu').
  ASSERT_EQ(step.getNumArguments(), 3u * kNumParams + 2);
  ASSERT_EQ(step.getNumResults(), 3u * kNumParams + 1);
  EXPECT_FALSE(step.getResultAttr(0, SDDialect::kAliasesAttrName));
  for (unsigned r = 1; r <= 3u * kNumParams; ++r) {
    auto aliases =
        step.getResultAttrOfType<IntegerAttr>(r, SDDialect::kAliasesAttrName);
    ASSERT_TRUE(aliases) << "result #" << r;
    ASSERT_EQ(aliases.getInt(), r - 1) << "result #" << r;
  }
  // The last parameter and its moments, in their places.
  unsigned last = kNumParams - 1;
  auto param = step.getArgAttrOfType<ParamAttr>(last, SDDialect::kRoleAttrName);
  ASSERT_TRUE(param);
  EXPECT_EQ(param.getName().getValue(), "p" + std::to_string(last));
  for (auto [kind, offset] :
       {std::pair(MomentKind::mu, 1), std::pair(MomentKind::nu, 2)}) {
    auto state = step.getArgAttrOfType<OptimizerStateAttr>(
        offset * kNumParams + last, SDDialect::kRoleAttrName);
    ASSERT_TRUE(state);
    EXPECT_EQ(state.getParam(), param.getName());
    EXPECT_EQ(state.getKind(), kind);
  }
}

/// @f(a0, ..., a<n-1>) -> (a0, ..., a<n-1>), each [4, 8] sharded over
/// "fsdp" on dimension 0 and returned sharded on dimension 1.
std::string manyShardedArguments(int n) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "sd.mesh @mesh = <[\"fsdp\"=2]>\n";
  os << "func.func @f(";
  for (int i = 0; i < n; ++i)
    os << (i ? ", " : "") << "%a" << i
       << ": tensor<4x8xf32> {sd.sharding = #sd.sharding<@mesh, "
          "[{\"fsdp\"}, {}]>}";
  os << ") -> (";
  for (int i = 0; i < n; ++i)
    os << (i ? ", " : "")
       << "tensor<4x8xf32> {sd.sharding = #sd.sharding<@mesh, [{}, "
          "{\"fsdp\"}]>}";
  os << ") {\n  return ";
  for (int i = 0; i < n; ++i)
    os << (i ? ", " : "") << "%a" << i;
  os << " : ";
  for (int i = 0; i < n; ++i)
    os << (i ? ", " : "") << "tensor<4x8xf32>";
  os << "\n}\n";
  return text;
}

TEST_F(ManyArgumentsTest, PartitionOfManyArguments) {
  OwningOpRef<ModuleOp> module =
      run(manyShardedArguments(kNumParams), [](PassManager &pm) {
        pm.addNestedPass<func::FuncOp>(createPropagateSharding());
        pm.addNestedPass<func::FuncOp>(createPartition());
      });
  ASSERT_TRUE(module) << diagnostics;
  auto func = module->lookupSymbol<func::FuncOp>("f");
  ASSERT_TRUE(func);
  ASSERT_EQ(func.getNumArguments(), unsigned(kNumParams));
  ASSERT_EQ(func.getNumResults(), unsigned(kNumParams));
  auto localSharding = [](DictionaryAttr attrs) {
    return attrs ? attrs.getAs<ShardingAttr>(SDDialect::kLocalShardingAttrName)
                 : ShardingAttr();
  };
  // Blocks of rows in, blocks of columns out.
  Type rows = RankedTensorType::get({2, 8}, Float32Type::get(&context));
  Type columns = RankedTensorType::get({4, 4}, Float32Type::get(&context));
  for (int i = 0; i < kNumParams; ++i) {
    ASSERT_EQ(func.getArgumentTypes()[i], rows) << "argument #" << i;
    ASSERT_EQ(func.getResultTypes()[i], columns) << "result #" << i;
    DictionaryAttr argAttrs = func.getArgAttrDict(i);
    ShardingAttr in = localSharding(argAttrs);
    ASSERT_TRUE(in) << "argument #" << i;
    EXPECT_FALSE(argAttrs.get(SDDialect::kShardingAttrName));
    ASSERT_EQ(in.getDimShardings().size(), 2u);
    EXPECT_EQ(in.getDimShardings()[0].getAxes().size(), 1u);
    ShardingAttr out = localSharding(func.getResultAttrDict(i));
    ASSERT_TRUE(out) << "result #" << i;
    EXPECT_EQ(out.getDimShardings()[1].getAxes().size(), 1u);
  }
}

} // namespace
