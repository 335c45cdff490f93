//===- FreezeParameters.cpp - parameters a fine-tune does not train -------===//
//
// Marks parameters sd.frozen by glob patterns of their names (see the pass
// description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Autodiff.h"
#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/GlobPattern.h"

namespace mlir::sd {
#define GEN_PASS_DEF_FREEZEPARAMETERS
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {

/// Glob patterns and which of them matched a name.
struct Patterns {
  SmallVector<llvm::GlobPattern> globs;
  llvm::SmallBitVector used;

  /// Whether a pattern matches `name` (marking those that do).
  bool match(StringRef name) {
    bool any = false;
    for (auto [n, glob] : llvm::enumerate(globs))
      if (glob.match(name)) {
        used.set(n);
        any = true;
      }
    return any;
  }
};

class FreezeParametersPass
    : public mlir::sd::impl::FreezeParametersBase<FreezeParametersPass> {
public:
  using FreezeParametersBase::FreezeParametersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Patterns frozen, trained;
    if (failed(compile(module, "freeze", freeze, frozen)) ||
        failed(compile(module, "trainable", trainable, trained)))
      return signalPassFailure();
    bool anyTrained = false, anyParam = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      bool isLoss = func.getSymName() == "loss";
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        auto param =
            func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
        if (!param)
          continue;
        anyParam |= isLoss;
        StringRef name = param.getName().getValue();
        // Both sets of patterns see every name, so that each reports
        // whether it matched any.
        bool freezeIt = frozen.match(name);
        bool trainIt = trained.globs.empty() || trained.match(name);
        if (freezeIt || !trainIt) {
          if (!autodiff::isFrozenParameter(func, i) && isLoss)
            ++numFrozen;
          func.setArgAttr(i, SDDialect::kFrozenAttrName,
                          UnitAttr::get(func.getContext()));
        }
        anyTrained |= isLoss && autodiff::isTrainedParameter(func, i);
      }
    }
    for (auto [patterns, texts, option] :
         {std::tuple{&frozen, &freeze, "freeze"},
          std::tuple{&trained, &trainable, "trainable"}})
      for (auto [n, text] : llvm::enumerate(*texts))
        if (!patterns->used.test(n)) {
          emitError(module.getLoc())
              << option << " pattern '" << text << "' matches no parameter";
          return signalPassFailure();
        }
    if (anyParam && !anyTrained) {
      emitError(module.getLoc())
          << "every parameter of @loss is frozen: there is nothing to train";
      return signalPassFailure();
    }
  }

private:
  static LogicalResult compile(ModuleOp module, StringRef option,
                               ArrayRef<std::string> texts, Patterns &out) {
    for (const std::string &text : texts) {
      llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
      if (!glob)
        return emitError(module.getLoc())
               << option << " pattern '" << text
               << "' is not a glob pattern: " << toString(glob.takeError());
      out.globs.push_back(std::move(*glob));
    }
    out.used.resize(out.globs.size());
    return success();
  }
};

} // namespace
