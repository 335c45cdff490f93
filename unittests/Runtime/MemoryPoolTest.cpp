//===- MemoryPoolTest.cpp - Tests for the runtime's memory pools ----------===//

#include "sd/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sys/resource.h>
#include <string>
#include <thread>
#include <vector>

using namespace sd::rt;

namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

void *allocateOrNull(MemoryPool &pool, int64_t bytes, const std::string &name) {
  absl::StatusOr<void *> buffer = pool.allocate(bytes, name);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return buffer.ok() ? *buffer : nullptr;
}

TEST(FormatBytesTest, PicksTheLargestUnit) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(12 * kMiB), "12.00 MiB");
  EXPECT_EQ(formatBytes(1024 * kMiB), "1.00 GiB");
}

TEST(MemoryPoolTest, TracksLiveAndPeakBytes) {
  MemoryPool pool("device", 0, 0);
  void *a = allocateOrNull(pool, 1000, "a");
  void *b = allocateOrNull(pool, 3000, "b");
  EXPECT_EQ(pool.liveBytes(), 4000);
  EXPECT_EQ(pool.peakBytes(), 4000);
  pool.release(a);
  EXPECT_FALSE(pool.owns(a));
  EXPECT_EQ(pool.liveBytes(), 3000);
  EXPECT_EQ(pool.peakBytes(), 4000);
  void *c = allocateOrNull(pool, 500, "c");
  EXPECT_EQ(pool.liveBytes(), 3500);
  EXPECT_EQ(pool.peakBytes(), 4000);
  pool.resetPeak();
  EXPECT_EQ(pool.peakBytes(), 3500);
  EXPECT_TRUE(pool.owns(b));
  EXPECT_TRUE(pool.owns(c));
  pool.release(b);
  pool.release(c);
  pool.release(nullptr);
  EXPECT_EQ(pool.liveBytes(), 0);
  EXPECT_EQ(pool.budget(), 0);
}

TEST(MemoryPoolTest, BudgetExceededNamesTensorAndSizes) {
  MemoryPool pool("device", 3, 16 * kMiB);
  void *a = allocateOrNull(pool, 10 * kMiB, "weights");
  absl::StatusOr<void *> b = pool.allocate(12 * kMiB, "%7 = sd.dot_general");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.status().message(),
            "device 3: out of device memory allocating 12.00 MiB for '%7 = "
            "sd.dot_general': 10.00 MiB live + 12.00 MiB > budget 16.00 MiB "
            "(--device-memory)");
  // The failed allocation is not counted.
  EXPECT_EQ(pool.liveBytes(), 10 * kMiB);
  EXPECT_EQ(pool.peakBytes(), 10 * kMiB);
  // Exactly the budget fits.
  void *c = allocateOrNull(pool, 6 * kMiB, "c");
  EXPECT_EQ(pool.liveBytes(), 16 * kMiB);
  pool.release(c);
  pool.release(a);
}

TEST(MemoryPoolTest, HostPoolNamesItsFlag) {
  MemoryPool pool("host", 1, kKiB);
  absl::StatusOr<void *> b = pool.allocate(2 * kKiB, "offloaded");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("out of host memory"), std::string::npos);
  EXPECT_NE(b.status().message().find("'offloaded'"), std::string::npos);
  EXPECT_NE(b.status().message().find("(--host-memory)"), std::string::npos);
}

TEST(MemoryPoolTest, ReleaseMakesRoomAgain) {
  MemoryPool pool("device", 0, 4 * kKiB);
  void *a = allocateOrNull(pool, 3 * kKiB, "a");
  EXPECT_FALSE(pool.allocate(2 * kKiB, "b").ok());
  pool.release(a);
  void *b = allocateOrNull(pool, 2 * kKiB, "b");
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(pool.liveBytes(), 2 * kKiB);
  pool.release(b);
}

TEST(MemoryPoolTest, BuffersAre64ByteAlignedAndWritable) {
  MemoryPool pool("device", 0, 0);
  std::vector<void *> buffers;
  for (int64_t bytes : {1, 3, 63, 64, 65, 100, 4096, 12345}) {
    void *buffer = allocateOrNull(pool, bytes, "x");
    ASSERT_NE(buffer, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer) % 64, 0u) << bytes;
    std::memset(buffer, 0xab, static_cast<size_t>(bytes));
    buffers.push_back(buffer);
  }
  for (void *buffer : buffers)
    pool.release(buffer);
}

TEST(MemoryPoolTest, ZeroBytesYieldsDistinctPointers) {
  MemoryPool pool("device", 0, 64);
  std::set<void *> seen;
  for (int i = 0; i < 4; ++i) {
    void *buffer = allocateOrNull(pool, 0, "empty");
    ASSERT_NE(buffer, nullptr);
    EXPECT_TRUE(seen.insert(buffer).second);
    EXPECT_TRUE(pool.owns(buffer));
  }
  EXPECT_EQ(pool.liveBytes(), 0);
  for (void *buffer : seen)
    pool.release(buffer);
}

TEST(MemoryPoolTest, ReleaseAllFreesEverythingAndKeepsPeak) {
  MemoryPool pool("device", 0, 8 * kKiB);
  void *a = allocateOrNull(pool, 3 * kKiB, "a");
  allocateOrNull(pool, 4 * kKiB, "b");
  pool.releaseAll();
  EXPECT_EQ(pool.liveBytes(), 0);
  EXPECT_EQ(pool.peakBytes(), 7 * kKiB);
  EXPECT_FALSE(pool.owns(a));
  // The whole budget is available again.
  void *c = allocateOrNull(pool, 8 * kKiB, "c");
  pool.release(c);
}

TEST(MemoryPoolTest, NegativeSizeIsInvalid) {
  MemoryPool pool("device", 0, 0);
  absl::StatusOr<void *> buffer = pool.allocate(-1, "bad");
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemoryPoolTest, ConcurrentAllocationsAreCounted) {
  MemoryPool pool("device", 0, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        absl::StatusOr<void *> buffer = pool.allocate(128, "x");
        ASSERT_TRUE(buffer.ok());
        if (i % 2)
          pool.release(*buffer);
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(pool.liveBytes(), 4 * 100 * 128);
  pool.releaseAll();
}

} // namespace

/// Options with the cache on, as it is by default outside ASan builds.
static MemoryPoolOptions caching() {
  MemoryPoolOptions options;
  options.cacheBuffers = true;
  return options;
}

TEST(MemoryPoolTest, ReleasedBuffersAreReusedButNotCountedLive) {
  MemoryPool pool("device", 0, /*budget=*/0, caching());
  void *a = *pool.allocate(4000, "a");
  void *b = *pool.allocate(8000, "b");
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.liveBytes(), 0);
  EXPECT_EQ(pool.peakBytes(), 12000);
  void *again = *pool.allocate(4000, "again");
  EXPECT_EQ(again, a) << "a released buffer of the same size is reused";
  EXPECT_EQ(pool.liveBytes(), 4000);
  EXPECT_EQ(pool.peakBytes(), 12000);
  pool.release(again);
}

TEST(MemoryPoolTest, WithoutTheCacheReleasedBuffersAreNotCountedEither) {
  MemoryPoolOptions uncached;
  uncached.cacheBuffers = false;
  MemoryPool pool("device", 0, /*budget=*/10000, uncached);
  void *a = *pool.allocate(8000, "a");
  pool.release(a);
  EXPECT_FALSE(pool.owns(a));
  absl::StatusOr<void *> b = pool.allocate(9000, "b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(pool.liveBytes(), 9000);
  EXPECT_EQ(pool.peakBytes(), 9000);
  pool.release(*b);
}

TEST(MemoryPoolTest, TheCacheIsOffInAddressSanitizerBuilds) {
#ifdef __SANITIZE_ADDRESS__
  constexpr bool kAsan = true;
#else
  constexpr bool kAsan = false;
#endif
  EXPECT_EQ(MemoryPoolOptions().cacheBuffers, !kAsan);
  EXPECT_EQ(MemoryPoolOptions().mapLargeBuffers, !kAsan);
}

/// The process's virtual memory size (VmSize), in bytes.
static int64_t virtualBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0)
      return std::stoll(line.substr(7)) * 1024;
  return -1;
}

TEST(MemoryPoolTest, MappedBuffersGiveBackTheirWholeMapping) {
  // A size that is not a whole number of pages: its mapping is trimmed at
  // page boundaries and unmapped whole, so that nothing stays mapped.
  MemoryPoolOptions mapping;
  mapping.mapLargeBuffers = true;
  mapping.cacheBuffers = false;
  MemoryPool pool("device", 0, /*budget=*/0, mapping);
  int64_t before = virtualBytes();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<void *> buffer =
        pool.allocate((int64_t{2} << 20) + 1000, "odd");
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    pool.release(*buffer);
  }
  // 64 leaked tails of up to 2 MiB each would be over 100 MiB.
  EXPECT_LT(virtualBytes() - before, int64_t{8} << 20);
}

TEST(MemoryPoolTest, LargeBuffersAreMappedOnHugePageBoundaries) {
  constexpr int64_t kHuge = int64_t{2} << 20;
  for (bool cache : {false, true}) {
    MemoryPoolOptions mapping;
    mapping.mapLargeBuffers = true;
    mapping.cacheBuffers = cache;
    MemoryPool pool("device", 0, /*budget=*/0, mapping);
    // A mapped size, one just below it (the C allocator's, populated) and
    // one that is not a multiple of the alignment.
    for (int64_t bytes : {3 * kHuge, kHuge - 64, kHuge + 1000}) {
      SCOPED_TRACE(testing::Message() << bytes << " B, cache " << cache);
      absl::StatusOr<void *> buffer = pool.allocate(bytes, "big");
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      auto address = reinterpret_cast<uintptr_t>(*buffer);
      EXPECT_EQ(address % 64, 0u);
      if (bytes >= kHuge) {
        EXPECT_EQ(address % kHuge, 0u);
      }
      // Every byte is writable, and reads back.
      auto *bytesOf = static_cast<unsigned char *>(*buffer);
      std::memset(bytesOf, 0xab, static_cast<size_t>(bytes));
      EXPECT_EQ(bytesOf[0], 0xab);
      EXPECT_EQ(bytesOf[bytes - 1], 0xab);
      EXPECT_EQ(pool.liveBytes(), bytes);
      pool.release(*buffer);
      EXPECT_EQ(pool.liveBytes(), 0);
      // Again: from the cache when there is one, else mapped afresh.
      absl::StatusOr<void *> again = pool.allocate(bytes, "again");
      ASSERT_TRUE(again.ok()) << again.status();
      if (cache) {
        EXPECT_EQ(*again, *buffer);
      }
      static_cast<unsigned char *>(*again)[bytes - 1] = 1;
      pool.release(*again);
    }
    pool.releaseAll();
  }
}

TEST(MemoryPoolTest, CachedBuffersDoNotCountAgainstTheBudget) {
  // 8000 B cached, then a different size that fits the budget only if the
  // cache is not counted (and freed first).
  MemoryPool pool("device", 0, /*budget=*/10000);
  void *a = *pool.allocate(8000, "a");
  pool.release(a);
  absl::StatusOr<void *> b = pool.allocate(9000, "b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(pool.liveBytes(), 9000);
  pool.release(*b);
}

TEST(MemoryPoolTest, ACachedBufferServesRequestsUpToTwoThirdsItsSize) {
  MemoryPool pool("device", 0, /*budget=*/0, caching());
  void *big = *pool.allocate(12288, "big");
  pool.release(big);
  // 12288 is half as large again as 8192: the best fit.
  void *fit = *pool.allocate(8192, "fit");
  EXPECT_EQ(fit, big);
  EXPECT_EQ(pool.liveBytes(), 8192) << "live counts what was asked for";
  EXPECT_EQ(pool.heldBytes(), 12288) << "held counts the whole buffer";
  pool.release(fit);
  EXPECT_EQ(pool.heldBytes(), 12288);
  // 8128 B (8128 + 4064 < 12288) takes a buffer of its own, and the cache
  // frees the 12288 B one to stay within the peak and a quarter.
  void *small = *pool.allocate(8128, "small");
  EXPECT_EQ(pool.systemAllocations(), 2);
  EXPECT_EQ(pool.heldBytes(), 8128);
  pool.release(small);
  void *again = *pool.allocate(8000, "again");
  EXPECT_EQ(again, small);
  EXPECT_EQ(pool.systemAllocations(), 2);
  pool.release(again);
}

TEST(MemoryPoolTest, ARepeatedStepTakesNothingMoreFromTheSystem) {
  // Two sizes within half of each other, one taking the other's buffer in
  // the step: with exact sizes and the cache bounded by the live peak, each
  // step freed one size to map the other afresh.
  MemoryPool pool("device", 0, /*budget=*/0, caching());
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    void *a = *pool.allocate(8192, "a");
    void *b = *pool.allocate(7680, "b");
    pool.release(a);
    void *c = *pool.allocate(7680, "c");
    pool.release(b);
    pool.release(c);
    EXPECT_EQ(pool.systemAllocations(), 2);
    EXPECT_EQ(pool.peakBytes(), 8192 + 7680);
    EXPECT_LE(pool.heldBytes(), pool.peakBytes() + pool.peakBytes() / 4);
  }
}

TEST(MemoryPoolTest, WithoutABudgetThePoolHoldsAQuarterOverThePeak) {
  MemoryPool pool("device", 0, /*budget=*/0, caching());
  pool.release(*pool.allocate(64000, "peak"));
  // Sizes twice apart never fit each other's buffers; the cache frees
  // buffers, smallest first, to stay within 80000 B.
  for (int64_t bytes = 1024; bytes <= 32768; bytes *= 2) {
    pool.release(*pool.allocate(bytes, "x"));
    EXPECT_LE(pool.heldBytes(), 80000) << bytes << " B";
  }
  EXPECT_EQ(pool.peakBytes(), 64000);
  EXPECT_EQ(pool.liveBytes(), 0);
  // 1024 to 8192 B fitted beside the 64000 B; 16384 B did not, and freed
  // them all, then the 64000 B.
  EXPECT_EQ(pool.systemAllocations(), 7);
  EXPECT_EQ(pool.heldBytes(), 16384 + 32768);
}

/// The page faults this thread has taken so far.
static long threadPageFaults() {
  rusage usage;
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

/// Allocates `bytes` with malloc and writes each page of it (through a
/// volatile pointer, which the compiler cannot drop with the free).
static void *touched(size_t bytes, size_t alignment) {
  auto *buffer = static_cast<volatile char *>(std::aligned_alloc(alignment, bytes));
  for (size_t at = 0; at < bytes; at += 4096)
    buffer[at] = 1;
  return const_cast<char *>(buffer);
}

TEST(HostAllocatorTest, AThreadReusesWhatItFreedWithoutFreshPages) {
  if (!configureHostAllocator())
    GTEST_SKIP() << "not glibc, an AddressSanitizer build, or the "
                    "environment sets glibc's malloc variables";
  // A device thread's pattern: its arena's heap nearly full of a pool's
  // smaller buffers, then a library's 3 MiB workspace allocated and freed
  // per call (oneDNN's sgemm packing). With glibc's defaults each call maps
  // a heap of its own and unmaps it at the free: the same program without
  // configureHostAllocator (and with glibc's threshold moved to 4 MiB, as a
  // freed mapping moves it) took 15,380 faults over these 20 calls, every
  // call's 768 pages.
  long faults = 0;
  std::thread([&] {
    // glibc's heaps are 64 MiB, aligned to their size.
    constexpr uintptr_t kHeap = uintptr_t{64} << 20;
    std::vector<void *> kept = {touched(1 << 20, 64)};
    uintptr_t end =
        (reinterpret_cast<uintptr_t>(kept.front()) & ~(kHeap - 1)) + kHeap;
    // Fill the heap until 1-2 MiB are left at its top.
    while (true) {
      kept.push_back(touched(1 << 20, 64));
      uintptr_t at = reinterpret_cast<uintptr_t>(kept.back()) + (1 << 20);
      if (at > end || end - at < (uintptr_t{2} << 20))
        break;
    }
    for (int call = 0; call < 20; ++call)
      std::free(touched(3 << 20, 128));
    long before = threadPageFaults();
    for (int call = 0; call < 20; ++call)
      std::free(touched(3 << 20, 128));
    faults = threadPageFaults() - before;
    for (void *buffer : kept)
      std::free(buffer);
  }).join();
  EXPECT_LE(faults, 768);
}
