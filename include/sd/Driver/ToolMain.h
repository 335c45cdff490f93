//===- ToolMain.h - The main of a tool that runs under mpirun ----*- C++
//-*-===//
//
// sdrun and sdsample under mpirun: the tool joins the job first (ranks other
// than 0 then print nothing but errors), ends as every sd tool ends
// (sd/Support/ToolMain.h), and leaves the job as far as its run got: a
// failure before the ranks' start-up handshake is shared in it, so that
// every rank ends with an error instead of waiting; after the process group
// exists, MPI is left unfinalized, so that mpirun ends the ranks that may
// wait in a collective for this one. Header-only, so that only the tools
// that link SDRuntimeMpi see MPI.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_TOOLMAIN_H
#define SD_DRIVER_TOOLMAIN_H

#include "sd/Driver/MpiDevices.h"
#include "sd/Driver/RankAgreement.h"
#include "sd/Runtime/MpiTransport.h"
#include "sd/Support/ToolMain.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"

#include "absl/status/status.h"

#include <optional>

namespace mlir::sd {

/// How far a tool's run got in its MPI job; runMpiToolMain leaves the job
/// accordingly.
enum class MpiStage {
  /// Before the ranks' start-up handshake: a failure is shared in it.
  BeforeHandshake,
  /// The handshake ran (a failure in it is known to every rank that
  /// arrived).
  Handshaken,
  /// The process group exists: a failure leaves MPI unfinalized.
  Running,
};

/// What a tool's run sees of its process.
struct ToolProcess {
  /// The MPI job this process is a rank of; none when the tool runs alone.
  std::optional<::sd::rt::MpiJob> mpi;
  /// How far the run got; the run advances it.
  MpiStage stage = MpiStage::BeforeHandshake;
};

/// runToolMain for a tool that may run under mpirun: the MPI job joined
/// before `run`, and left after it as `process.stage` says.
inline int runMpiToolMain(llvm::StringRef tool, int &argc, char **&argv,
                          llvm::function_ref<absl::Status(ToolProcess &)> run) {
  llvm::InitLLVM init(argc, argv);
  ToolProcess process;
  absl::StatusOr<std::optional<::sd::rt::MpiJob>> mpi =
      joinToolMpiJob(argc, argv);
  if (!mpi.ok())
    return ::sd::toolExitCode(tool, mpi.status());
  process.mpi = std::move(*mpi);
  absl::Status status = run(process);
  int code = ::sd::toolExitCode(tool, status);
  if (!process.mpi)
    return code;
  if (status.ok()) {
    ::sd::rt::finalizeMpi();
  } else if (process.stage == MpiStage::BeforeHandshake) {
    // The others learn of the failure in the handshake they wait in.
    leaveMpiJobAfter(shareStartupFailure(status));
  } else if (process.stage == MpiStage::Handshaken) {
    leaveMpiJobAfter(status);
  }
  // (Running: a failed rank leaves MPI unfinalized, and mpirun ends the
  // others.)
  return code;
}

} // namespace mlir::sd

#endif // SD_DRIVER_TOOLMAIN_H
