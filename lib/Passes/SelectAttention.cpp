//===- SelectAttention.cpp - attention=auto -------------------------------===//
//
// The strategy for a sharded sequence chosen by the cost model: for each of
// flash (K/V all-gathered), ring, Ulysses and, when `ulysses_shards` is
// given, the hybrid ulysses_ring, a copy of the module runs the
// rest of the default pipeline (tiled with that strategy, partitioned) as a
// module nested in this one, and the cost model prices its collectives
// with the network model (sd/Sharding/Network.h: bytes over each link's
// bandwidth plus a latency per ring step); the module is then tiled with
// the strategy whose collectives take the least predicted time per step
// (then the fewest bytes; flash, then ring, on ties). A strategy whose
// partitioning fails (Ulysses with heads the sequence's devices do not
// divide) is not a candidate. A remark on the module names the choice and
// the prices.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModel.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Debug.h"

#include <tuple>

#define DEBUG_TYPE "sd-select-attention"

using namespace mlir;
using namespace mlir::sd;

namespace {
class SelectAttentionPass
    : public PassWrapper<SelectAttentionPass, OperationPass<ModuleOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SelectAttentionPass)

  explicit SelectAttentionPass(const PipelineOptions &options)
      : options(options) {}

  StringRef getArgument() const override { return "sd-select-attention"; }
  StringRef getDescription() const override {
    return "Tile attention with the context strategy the cost model prices "
           "cheapest";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<SDDialect>();
    OpPassManager pm(ModuleOp::getOperationName());
    buildDefaultPipeline(pm, variant(::sd::AttentionKind::Flash));
    pm.getDependentDialects(registry);
  }

  void runOnOperation() override {
    // On one device no sequence is sharded: every strategy is flash.
    if (options.mesh.empty())
      return tileWith(::sd::AttentionKind::Flash);
    std::optional<::sd::AttentionKind> best;
    Price bestPrice;
    std::string prices;
    llvm::raw_string_ostream os(prices);
    SmallVector<::sd::AttentionKind> kinds = {::sd::AttentionKind::Flash,
                                              ::sd::AttentionKind::Ring,
                                              ::sd::AttentionKind::Ulysses};
    // The hybrid is a candidate when its group size is given.
    if (options.tileAttention->ulyssesShards > 0)
      kinds.push_back(::sd::AttentionKind::UlyssesRing);
    for (::sd::AttentionKind kind : kinds) {
      std::optional<Price> p = price(kind);
      os << (kind == ::sd::AttentionKind::Flash ? "" : ", ")
         << ::sd::attentionKindName(kind) << " ";
      if (p)
        os << ::sd::formatSeconds(p->seconds) << " for " << p->bytes << " B";
      else
        os << "does not partition";
      if (p && (!best || std::tie(p->seconds, p->bytes) <
                             std::tie(bestPrice.seconds, bestPrice.bytes))) {
        best = kind;
        bestPrice = *p;
      }
    }
    LLVM_DEBUG(llvm::dbgs() << "per device and step: " << prices << "\n");
    ModuleOp module = getOperation();
    if (!best) {
      emitError(module.getLoc(), "attention=auto: no attention strategy "
                                 "partitions this program (")
          << prices << ")";
      return signalPassFailure();
    }
    // At the module's location, without the module attached (which the
    // diagnostic would print whole).
    emitRemark(module.getLoc(), "attention=auto chose ")
        << ::sd::attentionKindName(*best)
        << " (predicted communication per device and step: " << prices << ")";
    tileWith(*best);
  }

private:
  /// What one strategy's collectives cost per device and step.
  struct Price {
    int64_t bytes = 0;
    double seconds = 0;
  };

  /// Tiles the module's attention with strategy `kind`.
  void tileWith(::sd::AttentionKind kind) {
    TileAttentionOptions tile = *options.tileAttention;
    tile.attention = kind;
    if (kind != ::sd::AttentionKind::UlyssesRing)
      tile.ulyssesShards = 0;
    OpPassManager pm(ModuleOp::getOperationName());
    pm.addNestedPass<func::FuncOp>(createTileAttention(tile));
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }

  /// The pipeline for one strategy: partitioned, so that its collectives
  /// can be priced.
  PipelineOptions variant(::sd::AttentionKind kind) const {
    PipelineOptions result = options;
    result.tileAttention->attention = kind;
    if (kind != ::sd::AttentionKind::UlyssesRing)
      result.tileAttention->ulyssesShards = 0;
    result.partition = !result.mesh.empty();
    result.recordProvenance = false;
    result.explain.clear();
    return result;
  }

  /// What each device's collectives cost per step with `kind`, or nullopt
  /// when the program does not partition with it (its errors are not
  /// reported).
  std::optional<Price> price(::sd::AttentionKind kind) {
    ModuleOp copy = copyIntoNestedModule(getOperation());
    std::optional<Price> result;
    {
      ScopedDiagnosticHandler quiet(&getContext(),
                                    [](Diagnostic &) { return success(); });
      OpPassManager pm(ModuleOp::getOperationName());
      buildDefaultPipeline(pm, variant(kind));
      if (succeeded(runPipeline(pm, copy)))
        if (func::FuncOp func = findReportFunction(
                copy, options.train ? "train_step" : ""))
          if (FailureOr<CostReport> report =
                  computeCostReport(func, LayoutChoice::Auto);
              succeeded(report)) {
            result = Price{report->collectiveBytesPerDevice, 0.0};
            for (const AxisCommunication &axes :
                 predictCommunication(*report, options.network))
              result->seconds += axes.predictedSeconds;
          }
    }
    copy.erase();
    return result;
  }

  PipelineOptions options;
};
} // namespace

/// A new module, made by `builder` where it stands, holding `module`'s ops:
/// not the copy itself, nor other copies a search holds there (sd's
/// programs have no modules of their own inside).
static ModuleOp copyInto(OpBuilder &builder, ModuleOp module) {
  auto copy = ModuleOp::create(builder, module.getLoc());
  builder.setInsertionPointToStart(copy.getBody());
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!isa<ModuleOp>(op))
      builder.clone(op);
  return copy;
}

ModuleOp mlir::sd::copyIntoNestedModule(ModuleOp module) {
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  return copyInto(builder, module);
}

ModuleOp mlir::sd::copyIntoDetachedModule(ModuleOp module) {
  OpBuilder builder(module.getContext());
  return copyInto(builder, module);
}

std::unique_ptr<Pass>
mlir::sd::createSelectAttention(const PipelineOptions &options) {
  return std::make_unique<SelectAttentionPass>(options);
}
