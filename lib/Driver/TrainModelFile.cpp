//===- TrainModelFile.cpp - sdrun's training run of a model file ----------===//

#include "sd/Driver/TrainModelFile.h"
#include "sd/IR/SDDialect.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sd;

int mlir::sd::trainModelFile(const TrainRunOptions &options) {
  DialectRegistry registry;
  registry.insert<SDDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  // Compiler errors are printed where they arise; sdrun adds no second
  // message for them.
  bool sawError = false;
  context.getDiagEngine().registerHandler([&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      sawError = true;
    return failure();
  });
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(
      options.modelPath, sourceMgr, ParserConfig(&context));
  if (!module) {
    if (!sawError)
      llvm::errs() << "sdrun: error: could not parse '" << options.modelPath
                   << "'\n";
    return 1;
  }
  return runTraining(*module, options, [&] { return sawError; });
}
