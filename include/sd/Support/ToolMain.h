//===- ToolMain.h - How every sd tool ends -----------------------*- C++
//-*-===//
//
// sdrun, sdsample, sddata and sdgen end the same way: a failed run is one
// line `TOOL: error: MESSAGE` on stderr, written at once (so that the lines
// of an MPI job's ranks do not interleave), and exit code 1; a failure the
// run has already shown (a compiler diagnostic, --verify's FAILED line) is
// not printed again; a successful run exits 0. runToolMain is that main
// around a tool's run; tools under mpirun use runMpiToolMain
// (sd/Driver/ToolMain.h), which joins and leaves the job around it.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SUPPORT_TOOLMAIN_H
#define SD_SUPPORT_TOOLMAIN_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include "absl/status/status.h"

#include <string>

namespace sd {

/// A failure the run has already shown, so the tool prints nothing more.
/// `message` says what failed (for logs).
absl::Status reportedFailure(const std::string &message);
bool isReportedFailure(const absl::Status &status);

/// Prints `status` as `TOOL: error: MESSAGE` in one write.
void printToolError(llvm::StringRef tool, const absl::Status &status);

/// The exit code of a run that ended with `status` (0 or 1), its error
/// printed unless the run has shown it.
int toolExitCode(llvm::StringRef tool, const absl::Status &status);

/// A tool's main: LLVM's start-up (stack traces, UTF-8 arguments), `run`
/// (which parses the flags and does the work), then toolExitCode.
int runToolMain(llvm::StringRef tool, int &argc, char **&argv,
                llvm::function_ref<absl::Status()> run);

} // namespace sd

#endif // SD_SUPPORT_TOOLMAIN_H
