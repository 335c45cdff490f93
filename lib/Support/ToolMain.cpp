//===- ToolMain.cpp - How every sd tool ends ------------------------------===//

#include "sd/Support/ToolMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/strings/cord.h"

/// The payload that marks a reportedFailure.
static constexpr const char kReportedPayload[] = "sd.reported";

absl::Status sd::reportedFailure(const std::string &message) {
  absl::Status status = absl::AbortedError(message);
  status.SetPayload(kReportedPayload, absl::Cord());
  return status;
}

bool sd::isReportedFailure(const absl::Status &status) {
  return status.GetPayload(kReportedPayload).has_value();
}

void sd::printToolError(llvm::StringRef tool, const absl::Status &status) {
  llvm::errs() << tool.str() + ": error: " + std::string(status.message()) +
                      "\n";
}

int sd::toolExitCode(llvm::StringRef tool, const absl::Status &status) {
  if (status.ok())
    return 0;
  if (!isReportedFailure(status))
    printToolError(tool, status);
  return 1;
}

int sd::runToolMain(llvm::StringRef tool, int &argc, char **&argv,
                    llvm::function_ref<absl::Status()> run) {
  llvm::InitLLVM init(argc, argv);
  return toolExitCode(tool, run());
}
