//===- ProcessUsageTest.cpp - What the kernel counts for the process -----===//
//
// processUsage: the getrusage counts behind sdrun's "per process, steps"
// line and the metrics' page_faults. Touching fresh anonymous pages must
// show as page faults; the differences and sums are per field.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/MemoryPlan.h"

#include "gtest/gtest.h"

#include <sys/mman.h>

using namespace mlir::sd;

namespace {

TEST(ProcessUsage, CountsThePagesAFreshMappingTakes) {
  constexpr size_t kBytes = 16u << 20;
  void *memory = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  // Small pages, so that every 4 KiB touched is a fault of its own.
  ::madvise(memory, kBytes, MADV_NOHUGEPAGE);
  ProcessUsage before = processUsage();
  auto *bytes = static_cast<volatile char *>(memory);
  for (size_t i = 0; i < kBytes; i += 4096)
    bytes[i] = 1;
  ProcessUsage touched = processUsage() - before;
  ::munmap(memory, kBytes);
  // 4,096 pages; the kernel may map a few at once (fault-around applies
  // to files only), never fewer than a quarter.
  EXPECT_GE(touched.pageFaults, static_cast<int64_t>(kBytes / 4096 / 4));
  EXPECT_GE(touched.pageFaults, touched.majorPageFaults);
  EXPECT_GE(touched.involuntarySwitches, 0);
  EXPECT_GE(touched.userSeconds + touched.systemSeconds, 0.0);
}

TEST(ProcessUsage, SubtractsAndAddsFieldByField) {
  // Page faults, major page faults, involuntary switches, user and system
  // seconds.
  ProcessUsage a{10, 2, 7, 1.5, 0.25};
  ProcessUsage b{4, 1, 3, 0.5, 0.125};
  ProcessUsage d = a - b;
  EXPECT_EQ(d.pageFaults, 6);
  EXPECT_EQ(d.majorPageFaults, 1);
  EXPECT_EQ(d.involuntarySwitches, 4);
  EXPECT_DOUBLE_EQ(d.userSeconds, 1.0);
  EXPECT_DOUBLE_EQ(d.systemSeconds, 0.125);
  d += b;
  EXPECT_EQ(d.pageFaults, a.pageFaults);
  EXPECT_EQ(d.majorPageFaults, a.majorPageFaults);
  EXPECT_EQ(d.involuntarySwitches, a.involuntarySwitches);
  EXPECT_DOUBLE_EQ(d.userSeconds, a.userSeconds);
  EXPECT_DOUBLE_EQ(d.systemSeconds, a.systemSeconds);
}

} // namespace
