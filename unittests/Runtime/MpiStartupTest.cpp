//===- MpiStartupTest.cpp - Tests for the start-up messages ---------------===//
//
// Run on every rank of the MPI job SDMpiTransportTests is (see
// MpiTransportTest.cpp's main): rank 0 gathers every rank's bytes and
// broadcasts its own, short messages and ones past MPI's eager limit, and
// a rank that does not take part is named after the timeout.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiStartup.h"
#include "sd/Runtime/MpiTransport.h"

#include "gtest/gtest.h"

#include <mpi.h>

#include <string>

using namespace sd::rt;

namespace {

/// Rank r's bytes: r + 1 copies of a letter, or 300 kB (past the eager
/// limit of every transport) for `long`.
std::string bytesOf(int rank, bool longer) {
  return std::string(longer ? 300000 + rank : rank + 1,
                     static_cast<char>('a' + rank));
}

/// Each case starts when every rank has ended the last one, so that no
/// message of one (they share tags) is taken by the next.
class MpiStartupTest : public ::testing::Test {
protected:
  void TearDown() override { MPI_Barrier(MPI_COMM_WORLD); }
};

TEST_F(MpiStartupTest, GatherAndBroadcastInRounds) {
  MpiStartupChannel channel(60);
  ASSERT_EQ(channel.size(), mpiWorldSize());
  for (bool longer : {false, true, false}) {
    absl::StatusOr<std::vector<std::string>> all =
        channel.gather(bytesOf(channel.rank(), longer));
    ASSERT_TRUE(all.ok()) << all.status();
    if (channel.rank() == 0) {
      ASSERT_EQ(all->size(), static_cast<size_t>(channel.size()));
      for (int r = 0; r < channel.size(); ++r)
        EXPECT_EQ((*all)[r], bytesOf(r, longer)) << "rank " << r;
    } else {
      EXPECT_TRUE(all->empty());
    }
    absl::StatusOr<std::string> answer =
        channel.broadcast(channel.rank() == 0 ? bytesOf(7, longer) : "");
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(*answer, bytesOf(7, longer));
  }
  EXPECT_TRUE(channel.absent().empty());
}

TEST_F(MpiStartupTest, AMissingRankIsNamed) {
  // The last rank stays away: rank 0 names it, tells the others, and
  // sends it nothing.
  int last = mpiWorldSize() - 1;
  MpiStartupChannel channel(0.5);
  if (channel.rank() == last)
    return;
  absl::StatusOr<std::vector<std::string>> all = channel.gather("here");
  if (channel.rank() == 0) {
    ASSERT_TRUE(absl::IsDeadlineExceeded(all.status())) << all.status();
    EXPECT_EQ(all.status().message(),
              "MPI rank 0: rank " + std::to_string(last) +
                  " did not join the run's start-up within 0.5 s "
                  "(--collective-timeout); it is late, stopped, hung or "
                  "gone");
    EXPECT_EQ(channel.absent(), std::vector<int>{last});
  } else {
    ASSERT_TRUE(all.ok()) << all.status();
  }
  absl::StatusOr<std::string> answer =
      channel.broadcast(channel.rank() == 0 ? "rank missing" : "");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(*answer, "rank missing");
}

TEST_F(MpiStartupTest, AMissingRankZeroIsNamed) {
  MpiStartupChannel channel(0.5);
  absl::StatusOr<std::vector<std::string>> all = channel.gather("here");
  ASSERT_TRUE(all.ok()) << all.status();
  // Rank 0 does not answer.
  if (channel.rank() == 0)
    return;
  absl::StatusOr<std::string> answer = channel.broadcast("");
  ASSERT_TRUE(absl::IsDeadlineExceeded(answer.status())) << answer.status();
  EXPECT_EQ(answer.status().message(),
            "MPI rank " + std::to_string(channel.rank()) +
                ": rank 0 did not answer in the run's start-up within 1 s "
                "(2 x --collective-timeout); it is stopped, hung or gone");
}

} // namespace
