//===- MpiProcessGroup.cpp - Host messages between MPI ranks --------------===//
//
// The host side of a multi-process run (gathering a tensor, agreeing on a
// checkpoint) exchanges byte strings between ranks: an MPI_Iallgather of the
// sizes, then MPI_Iallgatherv of the bytes (in rounds, since MPI counts are
// ints and a gathered tensor may pass 2 GiB), on a communicator of its own
// (so that they never match the device threads' messages). Both are polled
// with a deadline instead of waited for: a stopped rank makes the others
// fail with DeadlineExceeded rather than hang (Open MPI 4.1 cannot cancel a
// collective, so the group is unusable afterwards and the caller ends the
// job). A rank that dies ends the job through mpirun as for collectives.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiTransport.h"

#include "absl/strings/str_format.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

using namespace sd;
using namespace sd::rt;

namespace {

class MpiProcessGroup final : public ProcessGroup {
public:
  MpiProcessGroup(MPI_Comm comm, int rank, int size,
                  const MpiTransportOptions &options)
      : comm(comm), rankIndex(rank), worldSize(size),
        timeoutSeconds(options.collectiveTimeoutSeconds),
        maxRoundBytes(options.maxHostRoundBytes) {}
  ~MpiProcessGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !broken)
      MPI_Comm_free(&comm);
  }

  int64_t rank() const override { return rankIndex; }
  int64_t size() const override { return worldSize; }

  absl::StatusOr<std::vector<std::string>>
  allGather(std::string_view bytes) override {
    if (broken)
      return absl::FailedPreconditionError(
          "the MPI process group failed earlier and cannot be used");
    long long mine = static_cast<long long>(bytes.size());
    std::vector<long long> sizes(worldSize);
    MPI_Request request;
    MPI_Iallgather(&mine, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG,
                   comm, &request);
    if (absl::Status status = wait(request); !status.ok())
      return status;
    // MPI counts are ints: each round carries at most `chunk` bytes of
    // every rank, so that a round's total fits one.
    long long chunk = std::max<long long>(
        1, std::min<long long>(maxRoundBytes, INT_MAX / worldSize));
    long long largest = *std::max_element(sizes.begin(), sizes.end());
    std::vector<std::string> parts(worldSize);
    for (int r = 0; r < worldSize; ++r)
      parts[r].reserve(static_cast<size_t>(sizes[r]));
    std::vector<int> counts(worldSize), displacements(worldSize);
    std::string round;
    for (long long offset = 0; offset < largest; offset += chunk) {
      int total = 0;
      for (int r = 0; r < worldSize; ++r) {
        counts[r] = static_cast<int>(
            std::clamp<long long>(sizes[r] - offset, 0, chunk));
        displacements[r] = total;
        total += counts[r];
      }
      round.resize(static_cast<size_t>(total));
      const char *send = bytes.data() + std::min(offset, mine);
      MPI_Iallgatherv(send, counts[rankIndex], MPI_BYTE, round.data(),
                      counts.data(), displacements.data(), MPI_BYTE, comm,
                      &request);
      if (absl::Status status = wait(request); !status.ok())
        return status;
      for (int r = 0; r < worldSize; ++r)
        parts[r].append(round, static_cast<size_t>(displacements[r]),
                        static_cast<size_t>(counts[r]));
    }
    return parts;
  }

private:
  /// Polls `request` until it completes or the deadline passes.
  absl::Status wait(MPI_Request &request) {
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(timeoutSeconds);
    int64_t polls = 0;
    while (true) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done)
        return absl::OkStatus();
      auto now = std::chrono::steady_clock::now();
      if (now > deadline) {
        broken = true;
        return absl::DeadlineExceededError(absl::StrFormat(
            "MPI rank %d: waited more than %.0f s for the other processes "
            "(--collective-timeout); one of them is stopped, hung or gone",
            rankIndex, timeoutSeconds));
      }
      // Spin briefly, then sleep: the host waits here while peers write
      // files.
      if (++polls > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      else
        std::this_thread::yield();
    }
  }

  MPI_Comm comm;
  int rankIndex;
  int worldSize;
  double timeoutSeconds;
  int64_t maxRoundBytes;
  bool broken = false;
};

} // namespace

absl::StatusOr<std::unique_ptr<ProcessGroup>>
sd::rt::createMpiProcessGroup(const MpiTransportOptions &options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return absl::FailedPreconditionError(
        "MPI is not initialized (sd::rt::initializeMpi)");
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return std::unique_ptr<ProcessGroup>(
      new MpiProcessGroup(comm, mpiWorldRank(), mpiWorldSize(), options));
}
