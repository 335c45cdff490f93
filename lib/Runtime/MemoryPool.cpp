//===- MemoryPool.cpp - A device's budgeted memory space ------------------===//
//
// Buffers come from the C allocator, 64-byte aligned (a cache line, and
// enough for any vector load the generated loops or OpenBLAS issue); the pool
// counts them and enforces the budget, so an over-budget program fails with
// the name of the tensor that did not fit rather than being killed.
//
// Released buffers are kept for reuse, as PyTorch's caching allocator does:
// a training step allocates the same sizes every step, and handing large
// buffers back to the system makes every step pay for fresh zeroed pages
// (page faults were a sixth of a DiT-S/2 step). A request takes the
// smallest cached buffer of at least its size and at most half as large
// again (best fit). Cached buffers are not live: budgets and peaks count
// live bytes only. Before a fresh allocation would take what the pool
// holds (its live buffers' whole sizes plus the cached ones) past the
// budget, or without one past the live peak and a quarter, cached buffers
// are freed, smallest first. Both the best fit and the
// quarter are what keeps a step from going back to the system: with
// exact sizes and the bound at the peak, DiT-S/2's bf16 step on
// `data:2` mapped 700 MB afresh every step (a fifth of its time on the
// virtual machines we develop on, where touching a fresh page traps to the
// hypervisor), and none with them. The cache is off in AddressSanitizer
// builds (MemoryPoolOptions), so that a use after release is caught.
//
// Buffers of 2 MiB and more are mapped from the system on transparent huge
// pages and populated in one call (MADV_POPULATE_WRITE) rather than faulted
// in a 4 KiB page at a time: every tensor is written whole anyway, and on a
// virtual machine each page fault is a trip through the hypervisor (filling
// 512 MiB took 1.7 s by faults and 0.05 s populated on the development VM).
// The C allocator keeps the smaller ones, and all of them in ASan builds.
//
// The C allocator is set up for this too (configureHostAllocator), once per
// process when the first caching pool is made. glibc gives each thread an
// arena of 64 MiB heaps; by default a heap left empty by a free is unmapped,
// and a top left free past a threshold handed back, so a thread that
// allocates and frees a few MiB per call gets fresh pages every call. The
// device threads do exactly that: oneDNN's sgemm allocates its packing
// buffers (1-3 MiB) per call, in arenas the pool's smaller buffers fill.
// Where the pool's buffers left the first heap with a little room, every
// such call mapped and unmapped a heap of its own: 10-20 thousand page
// faults a second through a whole run, DiT-S/2's f32 step on `data:2` at
// 1.4-1.9 s instead of 1.1-1.4, in about half of the runs (which half
// depended on where the buffers landed). The settings keep what a thread
// frees: requests up to 32 MiB from the arenas (above that they are
// mapped and unmapped, as before), no trimming below 1 GiB, and 64 MiB of
// padding at a heap's top, which also keeps an emptied heap in place.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace sd::rt;

/// The alignment of every buffer; aligned_alloc also wants sizes that are a
/// multiple of it.
static constexpr int64_t kAlignment = 64;

/// A transparent huge page: buffers this large are mapped, aligned to it.
static constexpr int64_t kHugePage = int64_t{2} << 20;
/// Smaller buffers from this size on have their pages populated at once.
static constexpr int64_t kPopulatedBytes = int64_t{64} << 10;

static bool mapped(int64_t rounded, const MemoryPoolOptions &options) {
  return options.mapLargeBuffers && rounded >= kHugePage;
}

/// The bytes a mapped buffer of `rounded` bytes spans: whole pages.
static size_t mappedLength(int64_t rounded) {
  auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return static_cast<size_t>((rounded + page - 1) / page * page);
}

/// `rounded` bytes from the system, or nullptr.
static void *systemAllocate(int64_t rounded, const MemoryPoolOptions &options) {
  if (!mapped(rounded, options)) {
    void *buffer = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
#ifdef MADV_POPULATE_WRITE
    // The whole pages inside a smaller buffer of 64 KiB or more, populated
    // at once too (pages the C allocator already holds stay as they are).
    if (buffer && options.mapLargeBuffers && rounded >= kPopulatedBytes) {
      auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
      auto begin = reinterpret_cast<uintptr_t>(buffer);
      uintptr_t first = (begin + page - 1) & ~(page - 1);
      uintptr_t last = (begin + rounded) & ~(page - 1);
      if (last > first)
        madvise(reinterpret_cast<void *>(first), last - first,
                MADV_POPULATE_WRITE);
    }
#endif
    return buffer;
  }
  // Over-map by a huge page and trim both ends (at page boundaries), so
  // that the buffer starts on a huge page boundary.
  size_t span = mappedLength(rounded);
  size_t length = span + static_cast<size_t>(kHugePage);
  void *region = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED)
    return nullptr;
  auto begin = reinterpret_cast<uintptr_t>(region);
  uintptr_t aligned = (begin + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  uintptr_t end = begin + length, used = aligned + span;
  if (aligned > begin)
    munmap(region, aligned - begin);
  if (end > used)
    munmap(reinterpret_cast<void *>(used), end - used);
  void *buffer = reinterpret_cast<void *>(aligned);
  // Both are advice: a kernel without them faults the pages in as before.
  madvise(buffer, span, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  madvise(buffer, span, MADV_POPULATE_WRITE);
#endif
  return buffer;
}

static void systemFree(void *buffer, int64_t rounded,
                       const MemoryPoolOptions &options) {
  if (mapped(rounded, options))
    munmap(buffer, mappedLength(rounded));
  else
    std::free(buffer);
}

std::string sd::rt::formatBytes(int64_t bytes) {
  static constexpr const char *kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024 && bytes > -1024)
    return absl::StrFormat("%d B", bytes);
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while ((value >= 1024 || value <= -1024) && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

bool sd::rt::cacheBuffersByDefault() {
  // GCC and Clang both define __SANITIZE_ADDRESS__ under -fsanitize=address.
#ifdef __SANITIZE_ADDRESS__
  return false;
#else
  return true;
#endif
}

bool sd::rt::configureHostAllocator() {
#if defined(__GLIBC__)
  static bool configured = [] {
    // AddressSanitizer's allocator replaces glibc's (and the pools keep
    // nothing there).
    if (!cacheBuffersByDefault())
      return false;
    // The user's own settings win.
    for (const char *name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                             "MALLOC_TOP_PAD_"})
      if (std::getenv(name))
        return false;
    if (const char *tunables = std::getenv("GLIBC_TUNABLES");
        tunables && std::strstr(tunables, "glibc.malloc."))
      return false;
    // 32 MiB is the largest threshold glibc takes on 64-bit (half a heap);
    // setting any of these also stops glibc from moving its thresholds.
    return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&
           mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 &&
           mallopt(M_TOP_PAD, 64 << 20) == 1;
  }();
  return configured;
#else
  return false;
#endif
}

MemoryPool::MemoryPool(std::string space, int64_t device, int64_t budget,
                       MemoryPoolOptions options)
    : space(std::move(space)), device(device), budgetBytes(budget),
      options(options) {
  if (options.cacheBuffers)
    configureHostAllocator();
}

MemoryPool::~MemoryPool() { releaseAll(); }

absl::StatusOr<void *> MemoryPool::allocate(int64_t bytes,
                                            const std::string &name) {
  if (bytes < 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d: negative size %d allocating '%s'", device, bytes, name));
  std::lock_guard<std::mutex> lock(mutex);
  if (budgetBytes > 0 && liveTotal + bytes > budgetBytes)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "device %d: out of %s memory allocating %s for '%s': %s live + %s > "
        "budget %s (--%s-memory)",
        device, space, formatBytes(bytes), name, formatBytes(liveTotal),
        formatBytes(bytes), formatBytes(budgetBytes), space));
  // At least one aligned block, so that allocate(0) is a distinct pointer.
  int64_t rounded = std::max<int64_t>(kAlignment, (bytes + kAlignment - 1) /
                                                      kAlignment * kAlignment);
  void *buffer = nullptr;
  // The best fit: the smallest cached buffer of at least `rounded` bytes,
  // if it is at most half as large again.
  auto cachedIt = cached.lower_bound(rounded);
  if (cachedIt != cached.end() && cachedIt->first <= rounded + rounded / 2) {
    buffer = cachedIt->second.back();
    rounded = cachedIt->first;
    cachedIt->second.pop_back();
    if (cachedIt->second.empty())
      cached.erase(cachedIt);
    cachedTotal -= rounded;
  } else {
    int64_t bound = budgetBytes > 0 ? budgetBytes
                                    : std::max(peakTotal + peakTotal / 4,
                                               liveHeld + rounded);
    for (auto it = cached.begin();
         it != cached.end() && liveHeld + cachedTotal + rounded > bound;) {
      for (void *block : it->second)
        systemFree(block, it->first, options);
      cachedTotal -= it->first * static_cast<int64_t>(it->second.size());
      it = cached.erase(it);
    }
    buffer = systemAllocate(rounded, options);
    if (!buffer && cachedTotal > 0) {
      // Give the cache back to the system and try once more.
      freeCached();
      buffer = systemAllocate(rounded, options);
    }
    if (buffer)
      ++systemAllocationCount;
  }
  if (!buffer)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "device %d: the system is out of memory allocating %s for '%s' (%s "
        "of %s memory live)",
        device, formatBytes(bytes), name, formatBytes(liveTotal), space));
  live.emplace(buffer, Block{bytes, rounded});
  liveTotal += bytes;
  liveHeld += rounded;
  peakTotal = std::max(peakTotal, liveTotal);
  return buffer;
}

void MemoryPool::release(void *buffer) {
  if (!buffer)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = live.find(buffer);
  assert(it != live.end() && "releasing a buffer this pool does not own");
  if (it == live.end())
    return;
  liveTotal -= it->second.bytes;
  liveHeld -= it->second.rounded;
  if (!options.cacheBuffers) {
    systemFree(buffer, it->second.rounded, options);
  } else {
    cached[it->second.rounded].push_back(buffer);
    cachedTotal += it->second.rounded;
  }
  live.erase(it);
}

void MemoryPool::freeCached() {
  for (auto &[size, buffers] : cached)
    for (void *buffer : buffers)
      systemFree(buffer, size, options);
  cached.clear();
  cachedTotal = 0;
}

bool MemoryPool::owns(const void *buffer) const {
  std::lock_guard<std::mutex> lock(mutex);
  return live.count(const_cast<void *>(buffer)) != 0;
}

void MemoryPool::releaseAll() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &[buffer, block] : live)
    systemFree(buffer, block.rounded, options);
  live.clear();
  liveTotal = 0;
  liveHeld = 0;
  freeCached();
}

int64_t MemoryPool::liveBytes() const {
  std::lock_guard<std::mutex> lock(mutex);
  return liveTotal;
}

int64_t MemoryPool::peakBytes() const {
  std::lock_guard<std::mutex> lock(mutex);
  return peakTotal;
}

int64_t MemoryPool::heldBytes() const {
  std::lock_guard<std::mutex> lock(mutex);
  return liveHeld + cachedTotal;
}

int64_t MemoryPool::systemAllocations() const {
  std::lock_guard<std::mutex> lock(mutex);
  return systemAllocationCount;
}

void MemoryPool::resetPeak() {
  std::lock_guard<std::mutex> lock(mutex);
  peakTotal = liveTotal;
}
