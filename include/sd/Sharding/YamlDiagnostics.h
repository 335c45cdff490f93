//===- YamlDiagnostics.h - llvm::yaml errors as statuses --------*- C++ -*-===//
//
// llvm::yaml reports syntax errors through a SourceMgr diagnostic handler.
// The readers of YAML files (logical axis rules, run configs) keep the first
// one and return it as their status instead of letting it be printed.
// Also how they read a file: with a size limit, and only a regular one.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SHARDING_YAMLDIAGNOSTICS_H
#define SD_SHARDING_YAMLDIAGNOSTICS_H

// checkRegularFile, declared here before lib/Support had it.
#include "sd/Support/Files.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <string>

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

/// An error at the first anchor (`&x`) or alias (`*x`) of the YAML `text`,
/// which sd's readers do not support, and at nesting deeper than 64 levels
/// (`label:line: ...`, `label: ...` without `withLine`). Syntax errors are
/// left to the reader.
absl::Status checkYamlStructure(std::string_view text, std::string_view label,
                                bool withLine = true);

/// The largest YAML file read: 16 MiB, far above any config or rules file.
constexpr uint64_t kMaxYamlFileBytes = uint64_t(16) << 20;

/// The text of the `what` ("config file", "rules file") at `path`, a
/// regular file of at most kMaxYamlFileBytes (readRegularFile).
absl::StatusOr<std::string> readYamlFile(std::string_view path,
                                         std::string_view what);

} // namespace sd

#endif // SD_SHARDING_YAMLDIAGNOSTICS_H
