//===- ApplyLogicalRules.cpp - logical axis names to shardings ------------===//
//
// Resolves `sd.logical_axes` on function arguments and `logical` on
// sharding constraints into `#sd.sharding`s with MaxDiffusion's logical axis
// rules.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/MeshSpec.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"
#include "sd/Sharding/LogicalRules.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/IR/Builders.h"

namespace mlir::sd {
#define GEN_PASS_DEF_APPLYLOGICALRULES
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {
struct ApplyLogicalRulesPass
    : public mlir::sd::impl::ApplyLogicalRulesBase<ApplyLogicalRulesPass> {
  using ApplyLogicalRulesBase::ApplyLogicalRulesBase;

  /// Rules given as an object (createApplyLogicalRules(rules)); they take
  /// the place of the `rules` option.
  std::optional<::sd::LogicalAxisRules> givenRules;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (givenRules) {
      parsedRules = *givenRules;
      return success();
    }
    absl::StatusOr<::sd::LogicalAxisRules> loaded = ::sd::loadRules(rules);
    if (!loaded.ok()) {
      // "rules.yml:3: message": the file's line is the error's location (a
      // preset's error has none).
      StringRef message(loaded.status().message().data(),
                        loaded.status().message().size());
      auto [where, rest] = message.split(": ");
      auto [file, lineText] = where.rsplit(':');
      unsigned line = 0;
      if (rest.empty() || lineText.getAsInteger(10, line))
        return emitError(UnknownLoc::get(ctx)) << message;
      return emitError(FileLineColLoc::get(ctx, file, line, 0)) << rest;
    }
    parsedRules = std::move(*loaded);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto meshOp =
        SymbolTable::lookupNearestSymbolFrom<MeshOp>(func, getMeshRef());
    bool needsMesh = false;
    func.walk([&](ShardingConstraintOp op) {
      needsMesh |= op.getLogicalAttr() != nullptr;
    });
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      needsMesh |= func.getArgAttr(i, SDDialect::kLogicalAxesAttrName) !=
                   nullptr;
    if (!needsMesh)
      return;
    if (!meshOp) {
      emitError(func.getLoc()) << "no sd.mesh @" << meshName
                       << " to apply logical axis rules against; pass "
                          "--mesh or run sd-materialize-mesh";
      return signalPassFailure();
    }
    mesh = meshOp.getMesh();
    spec = toMeshSpec(mesh);

    // The argument attributes are rebuilt once: setArgAttr per argument
    // would rebuild the whole array each time, quadratic in their count.
    SmallVector<DictionaryAttr> argAttrs;
    func.getAllArgAttrs(argAttrs);
    bool changed = false;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto logical = func.getArgAttrOfType<LogicalAxesAttr>(
          i, SDDialect::kLogicalAxesAttrName);
      if (!logical || func.getArgAttr(i, SDDialect::kShardingAttrName))
        continue;
      ShardingAttr sharding =
          resolve(func.getLoc(), argumentName(func, i), logical,
                  func.getArgumentTypes()[i]);
      if (!sharding)
        return signalPassFailure();
      NamedAttrList attrs(argAttrs[i]);
      attrs.set(SDDialect::kShardingAttrName, sharding);
      argAttrs[i] = attrs.getDictionary(func.getContext());
      changed = true;
    }
    if (changed) {
      func.setAllArgAttrs(argAttrs);
      shareDonatedShardings(func);
    }

    WalkResult result = func.walk([&](ShardingConstraintOp op) {
      LogicalAxesAttr logical = op.getLogicalAttr();
      if (!logical || op.getShardingAttr())
        return WalkResult::advance();
      std::string name = "sharding constraint";
      if (auto named = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
        name = named.str();
      ShardingAttr sharding = resolve(op.getLoc(), name, logical, op.getType());
      if (!sharding)
        return WalkResult::interrupt();
      op.setShardingAttr(sharding);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

private:
  /// A donated result (`sd.aliases`) is its argument's buffer: without a
  /// sharding of its own it takes the argument's, as sd-build-train-step
  /// gives it when the rules ran before the step was built (the planner
  /// builds the step first, buildMeshFreePipeline).
  static void shareDonatedShardings(func::FuncOp func) {
    SmallVector<DictionaryAttr> resultAttrs;
    func.getAllResultAttrs(resultAttrs);
    bool changed = false;
    for (DictionaryAttr &attrs : resultAttrs) {
      auto alias = attrs.getAs<IntegerAttr>(SDDialect::kAliasesAttrName);
      if (!alias || attrs.get(SDDialect::kShardingAttrName) ||
          alias.getInt() < 0 ||
          alias.getInt() >= int64_t(func.getNumArguments()))
        continue;
      Attribute sharding =
          func.getArgAttr(alias.getInt(), SDDialect::kShardingAttrName);
      if (!sharding)
        continue;
      NamedAttrList list(attrs);
      list.set(SDDialect::kShardingAttrName, sharding);
      attrs = list.getDictionary(func.getContext());
      changed = true;
    }
    if (changed)
      func.setAllResultAttrs(resultAttrs);
  }

  FlatSymbolRefAttr getMeshRef() {
    return FlatSymbolRefAttr::get(&getContext(), meshName);
  }

  /// The parameter name, or the input kind, of argument `i` for messages.
  static std::string argumentName(func::FuncOp func, unsigned i) {
    Attribute role = func.getArgAttr(i, SDDialect::kRoleAttrName);
    if (auto param = dyn_cast_or_null<ParamAttr>(role))
      return param.getName().str();
    if (auto input = dyn_cast_or_null<InputAttr>(role))
      return stringifyInputKind(input.getKind()).str();
    return "argument #" + std::to_string(i);
  }

  /// The sharding the rules give a tensor of `type` with `logical` names;
  /// null after an error at `loc`. A dimension its mesh axes do not divide
  /// is padded, as GSPMD pads.
  ShardingAttr resolve(Location loc, const std::string &name,
                       LogicalAxesAttr logical, Type type) {
    auto tensorType = cast<RankedTensorType>(type);
    std::vector<std::string> names;
    for (StringAttr n : logical.getNames())
      names.push_back(n.str());
    std::vector<int64_t> shape(tensorType.getShape().begin(),
                               tensorType.getShape().end());
    auto axes = parsedRules.resolve(spec, name, names, shape);
    if (!axes.ok()) {
      emitError(loc) << std::string(axes.status().message());
      return {};
    }
    MLIRContext *ctx = &getContext();
    SmallVector<DimShardingAttr> dims;
    for (auto [d, dimAxes] : llvm::enumerate(*axes)) {
      SmallVector<StringAttr> axisNames;
      for (const std::string &axis : dimAxes)
        axisNames.push_back(StringAttr::get(ctx, axis));
      dims.push_back(DimShardingAttr::get(ctx, axisNames, /*is_closed=*/true,
                                          std::nullopt));
    }
    return ShardingAttr::get(ctx, getMeshRef(), dims, {});
  }

  ::sd::LogicalAxisRules parsedRules;
  MeshAttr mesh;
  ::sd::MeshSpec spec;
};
} // namespace

std::unique_ptr<Pass>
mlir::sd::createApplyLogicalRules(const ::sd::LogicalAxisRules &rules,
                                  const ApplyLogicalRulesOptions &options) {
  auto pass = std::make_unique<ApplyLogicalRulesPass>(options);
  pass->givenRules = rules;
  return pass;
}
