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

#include "llvm/Support/SourceMgr.h"

#include <optional>

namespace llvm::yaml {
class Node;
} // namespace llvm::yaml

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

/// What the readers of one YAML text share: llvm::yaml reports syntax
/// errors through `sourceMgr`, whose handler keeps the first one in
/// `syntaxError` so that it becomes the returned status instead of being
/// printed to stderr; `error` makes the reader's own complaints.
class YamlReaderBase {
protected:
  explicit YamlReaderBase(std::string_view fileName);
  YamlReaderBase(const YamlReaderBase &) = delete;
  YamlReaderBase &operator=(const YamlReaderBase &) = delete;

  /// `file:line: message` at `node` (`file: message` without a location);
  /// a pending syntax error wins, since a structural complaint about a
  /// half-parsed node would only confuse.
  absl::Status error(const llvm::yaml::Node *node,
                     std::string_view message) const;

  std::string fileName;
  llvm::SourceMgr sourceMgr;
  std::optional<absl::Status> syntaxError;

private:
  static void captureDiagnostic(const llvm::SMDiagnostic &diag, void *ctx);
};

/// The largest YAML file read: 16 MiB, far above any config or rules file.
constexpr uint64_t kMaxYamlFileBytes = uint64_t(16) << 20;

/// The text of the `what` ("config file", "rules file") at `path`, a
/// regular file of at most kMaxYamlFileBytes (readRegularFile).
absl::StatusOr<std::string> readYamlFile(std::string_view path,
                                         std::string_view what);

} // namespace sd

#endif // SD_SHARDING_YAMLDIAGNOSTICS_H
