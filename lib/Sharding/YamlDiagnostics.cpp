//===- YamlDiagnostics.cpp - llvm::yaml errors as statuses ----------------===//

#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

#include "llvm/Support/SourceMgr.h"

#include <string>

absl::Status sd::yamlDiagnosticStatus(const llvm::SMDiagnostic &diag,
                                      std::string_view label, bool withLine) {
  // Lowercase, without llvm::yaml's trailing "!" or ".".
  std::string message = diag.getMessage().str();
  while (!message.empty() && (message.back() == '!' || message.back() == '.'))
    message.pop_back();
  if (!message.empty())
    message[0] = absl::ascii_tolower(message[0]);
  if (!withLine)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", label, message));
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s", label, diag.getLineNo(), message));
}
