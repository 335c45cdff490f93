//===- MpiTransport.h - Collectives between processes -----------*- C++ -*-===//
//
// A Transport for meshes that span processes: each MPI rank is one process
// of the mesh (MeshSpec's process-major numbering), runs its own devices as
// threads (MeshRuntime with MeshRuntimeOptions::process), and exchanges
// with the devices of other ranks through MPI point-to-point messages.
// Members of a group inside one process still share memory.
//
// Results are bitwise those of the shared-memory transport on the same
// global mesh: reductions add the same operands in the same member order.
//
// The library SDRuntimeMpi holds it, so that only programs that use MPI
// link against it. This header does not include <mpi.h>.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_MPITRANSPORT_H
#define SD_RUNTIME_MPITRANSPORT_H

#include "sd/Runtime/Runtime.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <memory>
#include <optional>

namespace sd::rt {

/// Initializes MPI with MPI_THREAD_MULTIPLE (device threads call MPI
/// concurrently) unless it is already initialized. FailedPrecondition when
/// the library provides a lower thread level. `argc`/`argv` may be null.
absl::Status initializeMpi(int *argc = nullptr, char ***argv = nullptr);
/// Finalizes MPI if it was initialized and is not finalized yet. Every
/// MpiTransport must be destroyed before.
void finalizeMpi();
/// This process's rank in MPI_COMM_WORLD and the world's size (MPI must be
/// initialized).
int mpiWorldRank();
int mpiWorldSize();

/// This process's place in an MPI job.
struct MpiJob {
  int rank = 0;
  int size = 1;
};
/// Joins the MPI job mpirun started this process in, if any (Open MPI and
/// PMIx launchers set OMPI_COMM_WORLD_SIZE or PMIX_RANK): initializes MPI
/// (initializeMpi, with the program's arguments) and returns the rank and
/// the world's size; nullopt for a process no launcher started.
absl::StatusOr<std::optional<MpiJob>> joinMpiJob(int &argc, char **&argv);
/// Sends this process's standard output to /dev/null, so that ranks other
/// than 0 print nothing but errors. Flush buffered output streams first.
void discardStdout();

struct MpiTransportOptions {
  /// After an abort, how long a device waits for its messages to remote
  /// peers to complete before it calls MPI_Abort (the last resort: a send
  /// cannot be withdrawn, and its operand must outlive it).
  double abortGraceSeconds = 60;
  /// How long a device waits for a message from another rank before it
  /// gives up with DeadlineExceeded naming that rank (a stopped or hung
  /// peer, which MPI cannot tell from a slow one); sdrun's
  /// --collective-timeout.
  double collectiveTimeoutSeconds = 600;
  /// The most bytes of each rank one round of a process group's allGather
  /// carries (it also stays under INT_MAX bytes for all ranks together,
  /// MPI's count limit); longer strings take several rounds. Tests lower
  /// it.
  int64_t maxHostRoundBytes = int64_t(1) << 30;
};

/// The transport of this rank's devices of `mesh`. MPI must be initialized
/// with MPI_THREAD_MULTIPLE (initializeMpi). InvalidArgument when the world
/// size is not mesh.numProcesses(); FailedPrecondition when MPI is not
/// initialized or its thread level is too low; InvalidArgument when
/// message tags for the devices of one process would not fit MPI_TAG_UB.
/// Collective over MPI_COMM_WORLD: every rank creates its transport.
absl::StatusOr<std::unique_ptr<Transport>>
createMpiTransport(const MeshSpec &mesh,
                   const MpiTransportOptions &options = {});

/// The ProcessGroup of this rank among MPI_COMM_WORLD's (rank = process of
/// the mesh). Each allGather waits at most
/// `options.collectiveTimeoutSeconds` for the other ranks, then fails with
/// DeadlineExceeded. FailedPrecondition when MPI is not initialized.
/// Collective over MPI_COMM_WORLD.
absl::StatusOr<std::unique_ptr<ProcessGroup>>
createMpiProcessGroup(const MpiTransportOptions &options = {});

/// What one rank of an MPI job gives the mesh runtime (RuntimeOptions'
/// fields of the same names): the transport of each program's mesh and the
/// host's process group.
struct MpiConnections {
  TransportFactory transportFactory;
  std::shared_ptr<ProcessGroup> processGroup;
};
/// createMpiTransport as a factory and createMpiProcessGroup, both with
/// `options`; the latter's errors.
absl::StatusOr<MpiConnections> connectMpi(const MpiTransportOptions &options);

} // namespace sd::rt

#endif // SD_RUNTIME_MPITRANSPORT_H
