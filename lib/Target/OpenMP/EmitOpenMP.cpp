//===- EmitOpenMP.cpp - the planned program as C++ files ------------------===//
//
// The drivers of the emitter: sd-emit-openmp (sdopt --emit=openmp) writes
// the planned function of a module; lowerToOpenMP (sdrun, the differential
// tests) inlines, plans and writes it in one call.
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/OpenMPEmitter.h"
#include "sd/Target/OpenMP/Passes.h"

#include "mlir/Interfaces/CallInterfaces.h"
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

/// Emits the function `name` (see findFunction) of `module` to `os`.
static LogicalResult emitFunction(ModuleOp module, StringRef name,
                                  llvm::raw_ostream &os,
                                  ProgramMemory *memory = nullptr) {
  func::FuncOp func = findFunction(module, name);
  if (!func)
    return module.emitError("no function ")
           << (name.empty() ? "" : "'" + name.str() + "' ")
           << "to emit as OpenMP";
  return emitOpenMPProgram(func, os, memory);
}

FailureOr<std::string> mlir::sd::lowerToOpenMP(ModuleOp module,
                                               StringRef funcName,
                                               ProgramMemory *memory) {
  PassManager pm(module.getContext());
  // The inliner (and the canonicalization it runs on every function) only
  // where a call is left: a training step from the pipeline has none.
  bool hasCalls =
      module.walk([](CallOpInterface) { return WalkResult::interrupt(); })
          .wasInterrupted();
  if (hasCalls)
    pm.addPass(createInlinerPass());
  pm.addNestedPass<func::FuncOp>(createLowerToOpenMP());
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(pm.run(module)) ||
      failed(emitFunction(module, funcName, os, memory)))
    return failure();
  return text;
}

namespace {
/// Writes to `os` rather than stdout when sdopt gives it its output file.
struct EmitOpenMPPass : public mlir::sd::impl::EmitOpenMPBase<EmitOpenMPPass> {
  using Base::Base;
  EmitOpenMPPass(llvm::raw_ostream &os, std::string name) : os(&os) {
    funcName = std::move(name);
  }
  void runOnOperation() override {
    if (failed(emitFunction(getOperation(), funcName, *os)))
      signalPassFailure();
  }
  llvm::raw_ostream *os = &llvm::outs();
};
} // namespace

std::unique_ptr<Pass> mlir::sd::createEmitOpenMP(llvm::raw_ostream &os,
                                                 std::string funcName) {
  return std::make_unique<EmitOpenMPPass>(os, std::move(funcName));
}
