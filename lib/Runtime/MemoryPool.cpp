//===- MemoryPool.cpp - A device's budgeted memory space ------------------===//
//
// Buffers come from the C allocator, 64-byte aligned (a cache line, and
// enough for any vector load the generated loops or OpenBLAS issue); the pool
// counts them and enforces the budget, so an over-budget program fails with
// the name of the tensor that did not fit rather than being killed.
//
// Released buffers are kept for reuse by size, as PyTorch's caching
// allocator does: a training step allocates the same sizes every step, and
// handing large buffers back to the system makes every step pay for fresh
// zeroed pages (page faults were a sixth of a DiT-S/2 step). Cached buffers
// are not live: budgets and peaks count live bytes only. Live plus cached
// bytes never exceed the budget, or without one the live peak: before a
// fresh allocation would pass that bound, cached buffers are freed. The
// cache is off in AddressSanitizer builds (MemoryPoolOptions), so that a use
// after release is caught.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <string>

using namespace sd::rt;

/// The alignment of every buffer; aligned_alloc also wants sizes that are a
/// multiple of it.
static constexpr int64_t kAlignment = 64;

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

MemoryPool::MemoryPool(std::string space, int64_t device, int64_t budget,
                       MemoryPoolOptions options)
    : space(std::move(space)), device(device), budgetBytes(budget),
      options(options) {}

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
  auto cachedIt = cached.find(rounded);
  if (cachedIt != cached.end() && !cachedIt->second.empty()) {
    buffer = cachedIt->second.back();
    cachedIt->second.pop_back();
    cachedTotal -= rounded;
  } else {
    int64_t bound = budgetBytes > 0
                        ? budgetBytes
                        : std::max(peakTotal, liveTotal + rounded);
    for (auto it = cached.begin();
         it != cached.end() && liveTotal + cachedTotal + rounded > bound;) {
      for (void *block : it->second)
        std::free(block);
      cachedTotal -= it->first * static_cast<int64_t>(it->second.size());
      it = cached.erase(it);
    }
    buffer = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
    if (!buffer && cachedTotal > 0) {
      // Give the cache back to the system and try once more.
      freeCached();
      buffer = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
    }
  }
  if (!buffer)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "device %d: the system is out of memory allocating %s for '%s' (%s "
        "of %s memory live)",
        device, formatBytes(bytes), name, formatBytes(liveTotal), space));
  live.emplace(buffer, Block{bytes, rounded});
  liveTotal += bytes;
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
  if (!options.cacheBuffers) {
    std::free(buffer);
  } else {
    cached[it->second.rounded].push_back(buffer);
    cachedTotal += it->second.rounded;
  }
  live.erase(it);
}

void MemoryPool::freeCached() {
  for (auto &[size, buffers] : cached)
    for (void *buffer : buffers)
      std::free(buffer);
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
    std::free(buffer);
  live.clear();
  liveTotal = 0;
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

void MemoryPool::resetPeak() {
  std::lock_guard<std::mutex> lock(mutex);
  peakTotal = liveTotal;
}
