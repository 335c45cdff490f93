//===- MpiStartup.h - Messages between ranks while a job starts -*- C++ -*-===//
//
// Before a multi-process run creates its process group and transports
// (whose MPI_Comm_dup waits for every rank, with no deadline), the ranks
// check that they agree (sd/Driver/RankAgreement.h). That exchange must
// itself end when a rank never arrives, and say which: it is made of
// point-to-point messages between rank 0 and each other rank of
// MPI_COMM_WORLD, each wait polled against --collective-timeout.
//
// In the library SDRuntimeMpi; this header does not include <mpi.h>.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_MPISTARTUP_H
#define SD_RUNTIME_MPISTARTUP_H

#include "absl/status/statusor.h"

#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace sd::rt {

/// The start-up exchange of one rank. Every rank makes the same calls in
/// the same order; each call is one round with a message tag of its own.
/// MPI must be initialized (initializeMpi).
class MpiStartupChannel {
public:
  /// Each wait gives up after `timeoutSeconds` (--collective-timeout).
  explicit MpiStartupChannel(double timeoutSeconds);

  int rank() const { return rankIndex; }
  int size() const { return worldSize; }

  /// Every rank sends `mine` to rank 0. Rank 0 returns all of them (index:
  /// rank), the others an empty list. DeadlineExceeded on rank 0 naming
  /// the ranks it did not hear from within the timeout (absent() then lists
  /// them); on another rank naming rank 0 when its message is not taken
  /// within the timeout.
  absl::StatusOr<std::vector<std::string>> gather(std::string_view mine);

  /// Rank 0 sends `bytes` to every other rank but the absent ones, which
  /// return them; rank 0 returns `bytes` once its messages are taken.
  /// DeadlineExceeded on a rank that does not hear from rank 0 within twice
  /// the timeout (rank 0 may have waited the timeout for another rank),
  /// naming it; on rank 0 naming the ranks that did not take its message.
  absl::StatusOr<std::string> broadcast(std::string_view bytes);

  /// On rank 0: the ranks a gather did not hear from (sorted).
  const std::vector<int> &absent() const { return absentRanks; }

private:
  /// The round's message tag: every rank counts the same rounds.
  int nextTag();

  int rankIndex = 0;
  int worldSize = 1;
  double timeoutSeconds;
  int round = 0;
  std::vector<int> absentRanks;
  /// What sends still in flight read (MPI may read a send's buffer until
  /// it completes, and a rank that gives up does not wait for that).
  std::deque<std::string> sent;
};

} // namespace sd::rt

#endif // SD_RUNTIME_MPISTARTUP_H
