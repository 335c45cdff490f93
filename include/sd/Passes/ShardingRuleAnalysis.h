//===- ShardingRuleAnalysis.h - rules of a function's ops -------*- C++ -*-===//
//
// The sharding rule of each op of a function, made once and shared by the
// passes that need every op's rule in turn (sd-propagate-sharding, then
// sd-partition) as an MLIR analysis. A rule is a function of its op alone
// (name, types, attributes), so it holds while ops only gain shardings or
// new operands of the same types; a pass that changes ops otherwise does
// not preserve the analysis, and the next one asks again. Rules are made
// once per context (SDDialect::getShardingRule) and shared by every op of
// the same signature.
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_SHARDINGRULEANALYSIS_H
#define SD_PASSES_SHARDINGRULEANALYSIS_H

#include "sd/IR/SDOps.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::sd {

class ShardingRuleAnalysis {
public:
  explicit ShardingRuleAnalysis(Operation *) {}

  /// The rule of `op`, made on first use; null after an error on `op`
  /// (not kept, so a later query reports it again).
  OpShardingRuleAttr getRule(ShardingRuleOpInterface op) {
    OpShardingRuleAttr &rule = rules[op.getOperation()];
    if (!rule)
      rule = cast_if_present<OpShardingRuleAttr>(
          op->getContext()->getLoadedDialect<SDDialect>()->getShardingRule(
              op, [&]() -> Attribute { return op.getShardingRule(); }));
    return rule;
  }

private:
  DenseMap<Operation *, OpShardingRuleAttr> rules;
};

} // namespace mlir::sd

#endif // SD_PASSES_SHARDINGRULEANALYSIS_H
