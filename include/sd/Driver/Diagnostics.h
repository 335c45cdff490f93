//===- Diagnostics.h - Readable diagnostics for the sd tools ----*- C++ -*-===//
//
// MLIR prints a diagnostic with the whole source line it points into; a
// function's location in sdgen's programs is a one-line signature of
// thousands of characters. The tools (sdopt, sdrun, sdgen) print their
// diagnostics through ReadableDiagnosticHandler, which trims such source
// excerpts to a window around the caret.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_DIAGNOSTICS_H
#define SD_DRIVER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::sd {

/// The widest source excerpt printed, in columns.
constexpr unsigned kMaxExcerptWidth = 160;

/// `text` (diagnostics as llvm::SourceMgr prints them) with each source
/// line longer than `width` and the caret line under it cut to `width`
/// columns around the caret, with "..." where text was cut.
std::string trimSourceExcerpts(llvm::StringRef text,
                               unsigned width = kMaxExcerptWidth);

namespace detail {
/// Holds the text a diagnostic is printed into before it is trimmed
/// (constructed before the handler that writes into it).
struct DiagnosticBuffer {
  std::string text;
  llvm::raw_string_ostream stream{text};
};
} // namespace detail

/// SourceMgrDiagnosticHandler whose source excerpts are trimmed
/// (trimSourceExcerpts) before they reach `os`. Files that `mgr` does not
/// hold are loaded by name, as SourceMgrDiagnosticHandler does. A remark or
/// warning the handler has printed already (the same text at the same
/// location, from a pipeline built again) is not printed again; errors
/// always are.
class ReadableDiagnosticHandler : private detail::DiagnosticBuffer,
                                  public SourceMgrDiagnosticHandler {
public:
  ReadableDiagnosticHandler(llvm::SourceMgr &mgr, MLIRContext *ctx,
                            llvm::raw_ostream &os = llvm::errs());

private:
  llvm::raw_ostream &out;
  /// The remarks and warnings printed so far.
  llvm::StringSet<> printed;
};

} // namespace mlir::sd

#endif // SD_DRIVER_DIAGNOSTICS_H
