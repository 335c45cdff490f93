//===- PlanRules.cpp - Logical-axis-rule variants the planner tries -------===//

#include "PlanRules.h"

#include "sd/IR/SDOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <optional>
#include <set>

using namespace mlir;
using namespace mlir::sd;

std::vector<LogicalUse> mlir::sd::collectLogicalUses(ModuleOp module) {
  std::set<std::pair<std::vector<std::string>, std::vector<int64_t>>> seen;
  std::vector<LogicalUse> uses;
  auto add = [&](LogicalAxesAttr logical, Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!logical || !tensor)
      return;
    LogicalUse use;
    for (StringAttr name : logical.getNames())
      use.names.push_back(name.str());
    use.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    if (seen.insert({use.names, use.shape}).second)
      uses.push_back(std::move(use));
  };
  module.walk([&](func::FuncOp func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      add(func.getArgAttrOfType<LogicalAxesAttr>(
              i, SDDialect::kLogicalAxesAttrName),
          func.getArgumentTypes()[i]);
    func.walk([&](ShardingConstraintOp op) {
      add(op.getLogicalAttr(), op.getType());
    });
  });
  return uses;
}

namespace {

using ::sd::LogicalAxisRules;
using ::sd::RuleVariant;

/// The mesh axes of each dimension of one use; nullopt where the rules
/// reject it.
using Resolved = std::optional<std::vector<std::vector<std::string>>>;

/// How `rules` shard each of `uses` on `mesh`.
std::vector<Resolved> resolution(const LogicalAxisRules &rules,
                                 const ::sd::MeshSpec &mesh,
                                 llvm::ArrayRef<LogicalUse> uses) {
  std::vector<Resolved> out;
  for (const LogicalUse &use : uses) {
    auto axes = rules.resolve(mesh, "tensor", use.names, use.shape);
    out.push_back(axes.ok() ? Resolved(*std::move(axes)) : std::nullopt);
  }
  return out;
}

int64_t axisSize(const ::sd::MeshSpec &mesh, const char *name) {
  const ::sd::MeshAxis *axis = mesh.findAxis(name);
  return axis ? axis->size() : 1;
}

} // namespace

std::vector<RulesChoice> mlir::sd::ruleVariants(const LogicalAxisRules &base,
                                                const ::sd::MeshSpec &mesh,
                                                llvm::ArrayRef<LogicalUse> uses,
                                                bool variants) {
  std::vector<LogicalAxisRules> candidates = {base};
  if (variants) {
    bool fsdp = axisSize(mesh, "fsdp") > 1,
         context = axisSize(mesh, "context") > 1;
    if (fsdp)
      candidates.push_back(applyRuleVariant(base, RuleVariant::FsdpSequence));
    if (context)
      candidates.push_back(applyRuleVariant(base, RuleVariant::ContextEmbed));
    if (fsdp && context)
      candidates.push_back(
          applyRuleVariant(applyRuleVariant(base, RuleVariant::FsdpSequence),
                           RuleVariant::ContextEmbed));
  }
  std::vector<RulesChoice> out;
  std::vector<std::vector<Resolved>> seen;
  for (LogicalAxisRules &rules : candidates) {
    std::vector<Resolved> resolved = resolution(rules, mesh, uses);
    if (std::find(seen.begin(), seen.end(), resolved) != seen.end())
      continue;
    seen.push_back(std::move(resolved));
    // In the table a file's rules go by the file's stem.
    llvm::StringRef name(rules.name);
    auto [file, suffix] = name.split('+');
    std::string shown = file.str();
    if (file.contains('/') || file.ends_with(".yml") || file.ends_with(".yaml"))
      shown = llvm::sys::path::stem(file).str();
    if (!suffix.empty())
      shown += "+" + suffix.str();
    out.push_back({std::move(shown), std::move(rules)});
  }
  return out;
}
