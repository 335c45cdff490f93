//===- TestPrintShardingRules.cpp - record each op's sharding rule --------===//
//
// Test only: makes ShardingRuleOpInterface visible in the IR, one
// `sd.sharding_rule` attribute per op, for FileCheck.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

namespace mlir::sd {
#define GEN_PASS_DEF_TESTPRINTSHARDINGRULES
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {
struct TestPrintShardingRulesPass
    : public mlir::sd::impl::TestPrintShardingRulesBase<
          TestPrintShardingRulesPass> {
  void runOnOperation() override {
    bool failed = false;
    getOperation().walk([&](Operation *op) {
      auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
      if (!ruleOp) {
        // Every sd op states its rule; a missing one is a bug to report,
        // not something to guess.
        if (isa_and_nonnull<SDDialect>(op->getDialect())) {
          op->emitOpError("does not implement ShardingRuleOpInterface");
          failed = true;
        }
        return;
      }
      OpShardingRuleAttr rule = ruleOp.getShardingRule();
      if (!rule) {
        failed = true;
        return;
      }
      op->setAttr(SDDialect::kShardingRuleAttrName, rule);
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
