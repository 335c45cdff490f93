//===- Diagnostics.cpp - Readable diagnostics for the sd tools ------------===//

#include "sd/Driver/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::sd;

namespace {
/// Whether `line` is a caret line: blanks, then '^', '~' and blanks.
bool isCaretLine(llvm::StringRef line) {
  llvm::StringRef marks = line.ltrim(' ');
  return !marks.empty() && marks.front() == '^' &&
         marks.find_first_not_of("^~ ") == llvm::StringRef::npos;
}
} // namespace

std::string mlir::sd::trimSourceExcerpts(llvm::StringRef text, unsigned width) {
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    llvm::StringRef line = lines[i];
    bool excerpt = line.size() > width && i + 1 < lines.size() &&
                   isCaretLine(lines[i + 1]);
    if (!excerpt) {
      out += line.str();
      if (i + 1 < lines.size())
        out += '\n';
      continue;
    }
    // A window of `width` columns with the caret a third of the way in.
    llvm::StringRef caret = lines[++i];
    size_t column = caret.find('^');
    size_t begin = column > width / 3 ? column - width / 3 : 0;
    begin = std::min(begin, line.size() - width);
    llvm::StringRef before = begin > 0 ? "..." : "";
    llvm::StringRef after = begin + width < line.size() ? "..." : "";
    out += (before + line.substr(begin, width) + after + "\n").str();
    std::string marks = caret.substr(column).rtrim(' ').str();
    marks = marks.substr(0, width - (column - begin));
    out += std::string(before.size() + column - begin, ' ') + marks;
    if (i + 1 < lines.size())
      out += '\n';
  }
  return out;
}

ReadableDiagnosticHandler::ReadableDiagnosticHandler(llvm::SourceMgr &mgr,
                                                     MLIRContext *ctx,
                                                     llvm::raw_ostream &os)
    : SourceMgrDiagnosticHandler(mgr, ctx, DiagnosticBuffer::stream), out(os) {
  // Each diagnostic (with its notes) is printed into the buffer, then
  // trimmed.
  setHandler([this](Diagnostic &diag) {
    DiagnosticBuffer::text.clear();
    emitDiagnostic(diag);
    // A diagnostic without a location (a pass option's) reads "error: ...",
    // not "<unknown>:0: error: ...".
    std::string located = DiagnosticBuffer::text;
    constexpr llvm::StringLiteral kUnknown = "<unknown>:0: ";
    for (size_t pos = located.find(kUnknown); pos != std::string::npos;
         pos = located.find(kUnknown, pos)) {
      if (pos == 0 || located[pos - 1] == '\n')
        located.erase(pos, kUnknown.size());
      else
        pos += kUnknown.size();
    }
    std::string trimmed = trimSourceExcerpts(located);
    // sdrun builds the pipeline more than once (for the mesh, the initial
    // values, --verify's one device); each build would repeat its remarks.
    if (diag.getSeverity() != DiagnosticSeverity::Error &&
        !printed.insert(trimmed).second)
      return;
    out << trimmed;
    out.flush();
  });
}
