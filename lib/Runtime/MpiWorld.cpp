//===- MpiWorld.cpp - Joining, leaving and connecting an MPI job ----------===//
//
// The process-level side of the MPI transport: MPI_Init_thread at the
// thread level sd's device threads need, a rank's place in the world, the
// job's detection from mpirun's environment, and the factory that connects
// a driver's transports and process group (sd/Runtime/MpiTransport.h).
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiTransport.h"

#include "absl/strings/str_format.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

using namespace sd;
using namespace sd::rt;

absl::Status sd::rt::initializeMpi(int *argc, char ***argv) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  else
    MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return absl::FailedPreconditionError(absl::StrFormat(
        "MPI provides thread level %d, but sd's device threads call MPI "
        "concurrently and need MPI_THREAD_MULTIPLE (%d)",
        provided, MPI_THREAD_MULTIPLE));
  return absl::OkStatus();
}

void sd::rt::finalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Finalize();
}

int sd::rt::mpiWorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int sd::rt::mpiWorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

absl::StatusOr<std::optional<sd::rt::MpiJob>> sd::rt::joinMpiJob(int &argc,
                                                                 char **&argv) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK"))
    return std::nullopt;
  if (absl::Status status = initializeMpi(&argc, &argv); !status.ok())
    return status;
  return MpiJob{mpiWorldRank(), mpiWorldSize()};
}

void sd::rt::discardStdout() {
  std::fflush(stdout);
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) {
    dup2(null, STDOUT_FILENO);
    close(null);
  }
}

absl::StatusOr<sd::rt::MpiConnections>
sd::rt::connectMpi(const MpiTransportOptions &options) {
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      createMpiProcessGroup(options);
  if (!group.ok())
    return group.status();
  MpiConnections connections;
  connections.transportFactory = [options](const MeshSpec &mesh) {
    return createMpiTransport(mesh, options);
  };
  connections.processGroup = std::move(*group);
  return connections;
}
