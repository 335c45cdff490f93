//===- TrainModelFile.cpp - sdrun's training run of a model file ----------===//

#include "sd/Driver/TrainModelFile.h"
#include "sd/Driver/Diagnostics.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sd;

absl::Status mlir::sd::trainModelFile(const TrainRunOptions &options,
                                      const TrainRunHooks &hooks) {
  DialectRegistry registry;
  registry.insert<SDDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
  registerAllSDExtensions(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  ReadableDiagnosticHandler diagnostics(sourceMgr, &context);
  bool sawError = false;
  ScopedDiagnosticHandler noteErrors(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      sawError = true;
    return failure();
  });
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(
      options.modelPath, sourceMgr, ParserConfig(&context));
  if (!module) {
    // The parser's diagnostics are the message; without one, say what failed.
    if (sawError)
      return reportedFailure("could not parse '" + options.modelPath + "'");
    return absl::InvalidArgumentError("could not parse '" + options.modelPath +
                                      "'");
  }
  return runTraining(*module, options, hooks);
}
