//===- TrainModelFile.cpp - sdrun's training run of a model file ----------===//

#include "sd/Driver/TrainModelFile.h"
#include "sd/Driver/Diagnostics.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Support/InputLimits.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
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
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFileOrSTDIN(options.modelPath);
  if (!file)
    return absl::NotFoundError("could not open input file " +
                               options.modelPath + ": " +
                               file.getError().message());
  // MLIR's parser recurses per nesting level: refuse what would overflow
  // its stack.
  if (absl::Status nesting = ::sd::checkNestingDepth(
          std::string_view((*file)->getBuffer()), options.modelPath);
      !nesting.ok())
    return nesting;
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module) {
    // The parser's diagnostics are the message; without one, say what failed.
    if (sawError)
      return reportedFailure("could not parse '" + options.modelPath + "'");
    return absl::InvalidArgumentError("could not parse '" + options.modelPath +
                                      "'");
  }
  return runTraining(*module, options, hooks);
}
