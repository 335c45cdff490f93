//===- ShardingRuleCacheTest.cpp - rules made once per context ------------===//
//
// SDDialect::getShardingRule keys a rule by the op's name, operand and
// result types and inherent attributes: ops that agree on all of them share
// one rule without making it again, and an op that differs in any of them
// (here only in its reduced dimension, or only in a discardable attribute,
// which no rule reads) gets its own, or the shared one.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sd;

namespace {

constexpr const char *kProgram = R"mlir(
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a = sd.reduce_sum %x dims = [0] : (tensor<8x8xf32>) -> tensor<8xf32>
  %b = sd.reduce_sum %x dims = [0] : (tensor<8x8xf32>) -> tensor<8xf32>
  %c = sd.reduce_sum %x dims = [1] : (tensor<8x8xf32>) -> tensor<8xf32>
  %d = sd.reduce_sum %x dims = [1] {sd.backward} : (tensor<8x8xf32>) -> tensor<8xf32>
  return %a, %b, %c, %d : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
)mlir";

/// kProgram parsed, and its reductions in order.
class ShardingRuleCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<SDDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kProgram, &context);
    ASSERT_TRUE(module);
    module->walk([&](ReduceSumOp op) { ops.push_back(op); });
    ASSERT_EQ(ops.size(), 4u);
    dialect = context.getLoadedDialect<SDDialect>();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  SmallVector<ShardingRuleOpInterface> ops;
  SDDialect *dialect = nullptr;
};

TEST_F(ShardingRuleCacheTest, OpsOfOneSignatureShareARule) {
  int made = 0;
  auto rule = [&](ShardingRuleOpInterface op) {
    return dialect->getShardingRule(op, [&]() -> Attribute {
      ++made;
      return op.getShardingRule();
    });
  };
  Attribute a = rule(ops[0]);
  ASSERT_TRUE(a);
  EXPECT_EQ(made, 1);
  // The same signature: the rule made for the first, not made again.
  EXPECT_EQ(rule(ops[1]), a);
  EXPECT_EQ(made, 1);
  // Another reduced dimension: a rule of its own.
  Attribute c = rule(ops[2]);
  EXPECT_EQ(made, 2);
  EXPECT_NE(c, a);
  EXPECT_EQ(c, ops[2].getShardingRule());
  // A discardable attribute is not part of the signature.
  EXPECT_EQ(rule(ops[3]), c);
  EXPECT_EQ(made, 2);
}

TEST_F(ShardingRuleCacheTest, AFailedRuleIsNotKept) {
  ShardingRuleOpInterface op = ops[0];
  EXPECT_FALSE(dialect->getShardingRule(op, [] { return Attribute(); }));
  int made = 0;
  EXPECT_TRUE(dialect->getShardingRule(op, [&]() -> Attribute {
    ++made;
    return op.getShardingRule();
  }));
  EXPECT_EQ(made, 1);
}

} // namespace
