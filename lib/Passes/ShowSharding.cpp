//===- ShowSharding.cpp - draw a tensor's sharding ------------------------===//
//
// A printing pass (see PrintReport.cpp): finds the value named by a
// parameter name, an input kind or an sd.name, and draws which device holds
// which block of it (sd/Analysis/ShardingViz.h). The IR is left unchanged.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/ShardingViz.h"
#include "sd/IR/MeshSpec.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

namespace mlir::sd {
#define GEN_PASS_DEF_SHOWSHARDING
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

/// Whether argument `index` of `func` is the parameter or input `name`.
static bool argumentIsNamed(func::FuncOp func, unsigned index, StringRef name) {
  Attribute role = func.getArgAttr(index, SDDialect::kRoleAttrName);
  if (auto param = dyn_cast_or_null<ParamAttr>(role))
    return param.getName().getValue() == name;
  if (auto input = dyn_cast_or_null<InputAttr>(role))
    return stringifyInputKind(input.getKind()) == name;
  return false;
}

namespace {
struct ShowShardingPass
    : public mlir::sd::impl::ShowShardingBase<ShowShardingPass> {
  using Base::Base;
  ShowShardingPass(llvm::raw_ostream &os, const ShowShardingOptions &options)
      : Base(options), os(&os) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (value.empty()) {
      emitError(module.getLoc(), "sd-show-sharding needs value=<parameter "
                                 "name, input kind or sd.name>");
      return signalPassFailure();
    }
    func::FuncOp func = findReportFunction(module, function);
    if (!func)
      return signalPassFailure();

    // An argument by role, else the results of ops with this sd.name.
    Value target;
    ShardingAttr sharding;
    bool localType = false;
    int64_t matches = 0;
    for (BlockArgument arg : func.getArguments())
      if (!target && argumentIsNamed(func, arg.getArgNumber(), value)) {
        target = arg;
        sharding = func.getArgAttrOfType<ShardingAttr>(
            arg.getArgNumber(), SDDialect::kShardingAttrName);
        // A partitioned program keeps the argument's layout as its local
        // sharding; its type is then one device's block.
        if (!sharding) {
          sharding = func.getArgAttrOfType<ShardingAttr>(
              arg.getArgNumber(), SDDialect::kLocalShardingAttrName);
          localType = static_cast<bool>(sharding);
        }
        matches = 1;
      }
    if (!target)
      module.walk([&](Operation *op) {
        auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName);
        if (!name || name.getValue() != value || op->getNumResults() == 0)
          return;
        if (++matches > 1)
          return;
        target = op->getResult(0);
        if (auto perValue = op->getAttrOfType<ShardingPerValueAttr>(
                SDDialect::kShardingAttrName))
          sharding = perValue.getShardings().front();
      });
    if (!target) {
      emitError(module.getLoc()) << "no parameter, input or sd.name called \""
                                 << value << "\" in @" << func.getSymName();
      return signalPassFailure();
    }
    auto type = dyn_cast<RankedTensorType>(target.getType());
    if (!sharding) {
      mlir::emitError(target.getLoc())
          << "\"" << value << "\" has no sharding yet (arguments get one from "
          << "the logical axis rules, op results from sd-propagate-sharding)";
      return signalPassFailure();
    }
    auto meshOp = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
        module, sharding.getMeshName());
    if (!meshOp || !type || !type.hasStaticShape() ||
        sharding.getRank() != type.getRank()) {
      mlir::emitError(target.getLoc())
          << "cannot draw the sharding of \"" << value << "\": it needs a "
          << "static type, a mesh and one sharding entry per dimension";
      return signalPassFailure();
    }

    ::sd::MeshSpec mesh = toMeshSpec(meshOp.getMesh());
    ::sd::DimAxes dimAxes;
    for (DimShardingAttr dim : sharding.getDimShardings()) {
      dimAxes.emplace_back();
      for (StringAttr axis : dim.getAxes())
        dimAxes.back().push_back(axis.str());
    }
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    if (localType) {
      // Back from one device's block to the global tensor.
      for (auto [d, dim] : llvm::enumerate(sharding.getDimShardings()))
        for (StringAttr axis : dim.getAxes())
          shape[d] *= mesh.findAxis(axis.str())->size();
      type = type.clone(llvm::ArrayRef<int64_t>(shape));
    }

    *os << value << ": " << type << " " << sharding << " on mesh @"
        << meshOp.getSymName() << " " << mesh.toString() << " ("
        << mesh.numDevices() << " devices)";
    if (matches > 1)
      *os << ", the first of " << matches << " values named so";
    *os << "\n" << ::sd::renderSharding(mesh, shape, dimAxes);
    markAllAnalysesPreserved();
  }

  /// Where the picture goes; not owned.
  llvm::raw_ostream *os = &llvm::outs();
};
} // namespace

std::unique_ptr<Pass>
mlir::sd::createShowSharding(llvm::raw_ostream &os,
                             const ShowShardingOptions &options) {
  return std::make_unique<ShowShardingPass>(os, options);
}
