//===- MpiStartup.cpp - Messages between ranks while a job starts ---------===//
//
// Rank 0 probes for each rank's message (MPI_Improbe, then MPI_Mrecv of the
// size it has) and the others for rank 0's, so that no size is exchanged
// first; sends are MPI_Isend polled with MPI_Test. Nothing here blocks in
// MPI: a rank that never arrives costs one timeout and is named.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiStartup.h"
#include "sd/Runtime/MpiTransport.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <thread>

using namespace sd;
using namespace sd::rt;

namespace {

using Clock = std::chrono::steady_clock;

/// Tags of the start-up rounds: far from 0, in case a program's own
/// messages on MPI_COMM_WORLD use small ones.
constexpr int kFirstTag = 20000;

/// A short pause between polls: start-up waits are for processes, not for
/// messages in flight.
void waitAWhile() {
  std::this_thread::sleep_for(std::chrono::microseconds(500));
}

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

/// "rank 2" or "ranks 1, 3".
std::string rankList(const std::vector<int> &ranks) {
  return absl::StrFormat("%s %s", ranks.size() == 1 ? "rank" : "ranks",
                         absl::StrJoin(ranks, ", "));
}

/// Receives the message of `tag` from `source` if one has arrived.
bool tryReceive(int source, int tag, std::string &out) {
  int found = 0;
  MPI_Message message;
  MPI_Status status;
  MPI_Improbe(source, tag, MPI_COMM_WORLD, &found, &message, &status);
  if (!found)
    return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  out.resize(static_cast<size_t>(count));
  MPI_Mrecv(out.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
  return true;
}

} // namespace

MpiStartupChannel::MpiStartupChannel(double timeoutSeconds)
    : rankIndex(mpiWorldRank()), worldSize(mpiWorldSize()),
      timeoutSeconds(timeoutSeconds) {}

int MpiStartupChannel::nextTag() { return kFirstTag + round++; }

absl::StatusOr<std::vector<std::string>>
MpiStartupChannel::gather(std::string_view mine) {
  int tag = nextTag();
  Clock::time_point deadline = deadlineAfter(timeoutSeconds);
  if (rankIndex != 0) {
    std::string &buffer = sent.emplace_back(mine);
    MPI_Request request;
    MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, 0, tag,
              MPI_COMM_WORLD, &request);
    for (int done = 0;;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done)
        return std::vector<std::string>();
      if (Clock::now() > deadline)
        return absl::DeadlineExceededError(absl::StrFormat(
            "MPI rank %d: rank 0 did not join the run's start-up within %g "
            "s (--collective-timeout); it is late, stopped, hung or gone",
            rankIndex, timeoutSeconds));
      waitAWhile();
    }
  }
  std::vector<std::string> parts(worldSize);
  parts[0] = std::string(mine);
  std::vector<bool> heard(worldSize, false);
  heard[0] = true;
  int missing = worldSize - 1;
  while (missing > 0) {
    for (int r = 1; r < worldSize; ++r)
      if (!heard[r] && tryReceive(r, tag, parts[r])) {
        heard[r] = true;
        --missing;
      }
    if (missing == 0)
      break;
    if (Clock::now() > deadline) {
      for (int r = 1; r < worldSize; ++r)
        if (!heard[r])
          absentRanks.push_back(r);
      return absl::DeadlineExceededError(absl::StrFormat(
          "MPI rank 0: %s did not join the run's start-up within %g s "
          "(--collective-timeout); %s late, stopped, hung or gone",
          rankList(absentRanks), timeoutSeconds,
          absentRanks.size() == 1 ? "it is" : "they are"));
    }
    waitAWhile();
  }
  return parts;
}

absl::StatusOr<std::string>
MpiStartupChannel::broadcast(std::string_view bytes) {
  int tag = nextTag();
  // Rank 0 may itself have waited the timeout for another rank before it
  // answers: the others wait twice as long, so that it is rank 0 that names
  // a missing rank, not they rank 0.
  Clock::time_point deadline =
      deadlineAfter(rankIndex == 0 ? timeoutSeconds : 2 * timeoutSeconds);
  if (rankIndex != 0) {
    std::string received;
    while (!tryReceive(0, tag, received)) {
      if (Clock::now() > deadline)
        return absl::DeadlineExceededError(absl::StrFormat(
            "MPI rank %d: rank 0 did not answer in the run's start-up within "
            "%g s (2 x --collective-timeout); it is stopped, hung or gone",
            rankIndex, 2 * timeoutSeconds));
      waitAWhile();
    }
    return received;
  }
  std::string &buffer = sent.emplace_back(bytes);
  std::vector<MPI_Request> requests;
  std::vector<int> peers;
  for (int r = 1; r < worldSize; ++r) {
    if (std::binary_search(absentRanks.begin(), absentRanks.end(), r))
      continue;
    MPI_Request &request = requests.emplace_back();
    MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, r, tag,
              MPI_COMM_WORLD, &request);
    peers.push_back(r);
  }
  for (int done = 0;;) {
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done)
      return std::string(bytes);
    if (Clock::now() > deadline) {
      std::vector<int> absent;
      for (size_t i = 0; i < requests.size(); ++i) {
        int complete = 0;
        MPI_Request_get_status(requests[i], &complete, MPI_STATUS_IGNORE);
        if (!complete)
          absent.push_back(peers[i]);
      }
      return absl::DeadlineExceededError(absl::StrFormat(
          "MPI rank 0: %s did not take part in the run's start-up within %g "
          "s (--collective-timeout); %s stopped, hung or gone",
          rankList(absent), timeoutSeconds,
          absent.size() == 1 ? "it is" : "they are"));
    }
    waitAWhile();
  }
}
