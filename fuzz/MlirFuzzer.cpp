//===- MlirFuzzer.cpp - Fuzzes sd programs through sdopt's pipeline ------===//
//
// Input: an .mlir program. As sdopt does: the nesting pre-scan, the parse
// with the sd dialect registered, the verifier, then the default pipeline on
// mesh data:2 up to partitioning. Diagnostics are expected and dropped; a
// crash, a hang or a sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//

#include "FuzzUtils.h"

#include "sd/IR/SDDialect.h"
#include "sd/Passes/Passes.h"
#include "sd/Support/InputLimits.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>

using namespace mlir;

namespace {

/// A context with sd's dialects, made once and renewed now and then: every
/// input interns its types and attributes in it for good.
MLIRContext &context() {
  static std::unique_ptr<MLIRContext> ctx;
  static int uses = 0;
  if (!ctx || ++uses % 1000 == 0) {
    DialectRegistry registry;
    registry.insert<mlir::sd::SDDialect, func::FuncDialect>();
    func::registerInlinerExtension(registry);
    ctx = std::make_unique<MLIRContext>(registry,
                                        MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
  }
  return *ctx;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // MLIR's lexer relies on the NUL after the buffer, as files read through
  // llvm::MemoryBuffer (sdopt's, sdrun's) have; the fuzzer's bytes lack one.
  std::string copy(reinterpret_cast<const char *>(data), size);
  llvm::StringRef text(copy.c_str(), size);
  if (!::sd::checkNestingDepth({text.data(), text.size()}, "fuzz.mlir").ok())
    return 0;
  MLIRContext &ctx = context();
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  if (!module)
    return 0;
  PassManager pm(&ctx);
  mlir::sd::PipelineOptions options;
  options.mesh = "data:2";
  options.partition = true;
  mlir::sd::buildDefaultPipeline(pm, options);
  (void)pm.run(*module);
  return 0;
}
