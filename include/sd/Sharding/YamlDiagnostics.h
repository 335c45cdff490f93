//===- YamlDiagnostics.h - llvm::yaml errors as statuses --------*- C++ -*-===//
//
// llvm::yaml reports syntax errors through a SourceMgr diagnostic handler.
// The readers of YAML files (logical axis rules, run configs) keep the first
// one and return it as their status instead of letting it be printed.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SHARDING_YAMLDIAGNOSTICS_H
#define SD_SHARDING_YAMLDIAGNOSTICS_H

#include "absl/status/status.h"

#include <string_view>

namespace llvm {
class SMDiagnostic;
} // namespace llvm

namespace sd {

/// An InvalidArgument status for a diagnostic of llvm::yaml, as
/// `label:line: message` (`label: message` without `withLine`, for text
/// whose lines mean nothing). The message follows our style: llvm::yaml's
/// "Could not find closing ]!" becomes "could not find closing ]".
absl::Status yamlDiagnosticStatus(const llvm::SMDiagnostic &diag,
                                  std::string_view label, bool withLine = true);

} // namespace sd

#endif // SD_SHARDING_YAMLDIAGNOSTICS_H
