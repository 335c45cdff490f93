//===- EmitOpenMP.cpp - the planned program as a C++ translation unit -----===//
//
// The drivers of the emitter: sd-emit-openmp (sdopt --emit=openmp) writes
// the planned function of a module; lowerToOpenMP (sdrun, the differential
// tests) inlines, plans and writes it in one call.
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/OpenMPEmitter.h"
#include "sd/Target/OpenMP/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::sd {
#define GEN_PASS_DEF_EMITOPENMP
#include "sd/Target/OpenMP/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

/// `name`, or else `train_step`, `loss`, the first function with a body.
static func::FuncOp findFunction(ModuleOp module, StringRef name) {
  if (!name.empty())
    return module.lookupSymbol<func::FuncOp>(name);
  for (StringRef preferred : {"train_step", "loss"})
    if (auto f = module.lookupSymbol<func::FuncOp>(preferred))
      return f;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal())
      return f;
  return nullptr;
}

FailureOr<std::string> mlir::sd::lowerToOpenMP(ModuleOp module,
                                               StringRef funcName) {
  PassManager pm(module.getContext());
  pm.addPass(createInlinerPass());
  pm.addNestedPass<func::FuncOp>(createLowerToOpenMP());
  if (failed(pm.run(module)))
    return failure();
  func::FuncOp func = findFunction(module, funcName);
  if (!func) {
    module.emitError("no function '") << funcName << "' to lower to OpenMP";
    return failure();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(emitOpenMPProgram(func, os)))
    return failure();
  return text;
}

namespace {
struct EmitOpenMPPass
    : public mlir::sd::impl::EmitOpenMPBase<EmitOpenMPPass> {
  using Base::Base;
  EmitOpenMPPass(llvm::raw_ostream &os, const EmitOpenMPOptions &options)
      : Base(options), os(&os) {}

  void runOnOperation() override {
    func::FuncOp func = findFunction(getOperation(), funcName);
    if (!func) {
      getOperation().emitError("no function to emit as OpenMP");
      return signalPassFailure();
    }
    if (failed(emitOpenMPProgram(func, *os)))
      signalPassFailure();
  }

  /// Where the unit goes: stdout, or sdopt's output file.
  llvm::raw_ostream *os = &llvm::outs();
};
} // namespace

std::unique_ptr<Pass> mlir::sd::createEmitOpenMP(llvm::raw_ostream &os,
                                                 std::string funcName) {
  EmitOpenMPOptions options;
  options.funcName = std::move(funcName);
  return std::make_unique<EmitOpenMPPass>(os, options);
}
