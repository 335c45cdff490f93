//===- FlashTiling.cpp - Flash-attention block sizes ----------------------===//

#include "sd/Passes/FlashTiling.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

using namespace mlir::sd;

/// Parses sysfs's cache size text ("1024K", "2M", "512").
static int64_t parseCacheSize(const std::string &text) {
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || value <= 0 || value > (1LL << 40))
    return 0;
  if (*end == 'K' || *end == 'k')
    value *= 1024;
  else if (*end == 'M' || *end == 'm')
    value *= 1024 * 1024;
  return value;
}

int64_t mlir::sd::hostL2CacheBytes() {
  constexpr int64_t kFallback = 1 << 20;
#ifdef _SC_LEVEL2_CACHE_SIZE
  long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (bytes > 0)
    return bytes;
#endif
  std::ifstream sysfs("/sys/devices/system/cpu/cpu0/cache/index2/size");
  std::string text;
  if (sysfs >> text) {
    int64_t bytes = parseCacheSize(text);
    if (bytes > 0)
      return bytes;
  }
  return kFallback;
}

FlashTiling mlir::sd::completeFlashTiling(FlashTiling t, int64_t d, int64_t dv,
                                          int64_t cacheBytes, int64_t skv) {
  bool allDerived = !t.blockQ && !t.blockKvCompute && !t.blockKv &&
                    !t.blockQDkv && !t.blockKvDkv && !t.blockKvDkvCompute &&
                    !t.blockQDq && !t.blockKvDq;
  constexpr int64_t kMinBlock = 16, kMaxTile = 512, kMaxKv = 4096;
  const int64_t budget = cacheBytes / 2;
  // A forward work item's tiles: query block, output accumulator, score
  // tile and the K/V tile it multiplies.
  auto tileBytes = [&](int64_t bq, int64_t bkv) {
    return 4 * (bq * d + bq * dv + bq * bkv + bkv * (d + dv));
  };
  int64_t square = kMinBlock;
  while (square * 2 <= kMaxTile && tileBytes(square * 2, square * 2) <= budget)
    square *= 2;
  if (t.blockQ == 0)
    t.blockQ = square;
  if (t.blockKvCompute == 0)
    t.blockKvCompute = square;
  if (t.blockKv == 0) {
    // Whole score tiles per K/V block, the block's K and V in half the cache.
    int64_t perTile = 4 * t.blockKvCompute * (d + dv);
    int64_t tiles = std::max<int64_t>(1, budget / std::max<int64_t>(perTile, 1));
    t.blockKv = std::min(t.blockKvCompute * tiles,
                         std::max(kMaxKv, t.blockKvCompute));
  }
  if (t.blockQDkv == 0)
    t.blockQDkv = t.blockQ;
  if (t.blockKvDkv == 0)
    t.blockKvDkv = t.blockKv;
  if (t.blockKvDkvCompute == 0)
    t.blockKvDkvCompute = t.blockKvCompute;
  if (t.blockQDq == 0)
    t.blockQDq = t.blockQ;
  if (t.blockKvDq == 0)
    t.blockKvDq = t.blockKv;
  // One pass over the tiles instead of two: the separate dQ pass recomputes
  // every tile's scores and dP (7 products per tile against 5). The dK/dV
  // key blocks grow, in whole sub-blocks, until there are at most two, so
  // that the partials (one dQ per key block) stay at most twice dQ.
  if (allDerived && skv > 0) {
    if ((skv + t.blockKvDkv - 1) / t.blockKvDkv > 2) {
      int64_t half = (skv + 1) / 2;
      t.blockKvDkv = (half + t.blockKvDkvCompute - 1) / t.blockKvDkvCompute *
                     t.blockKvDkvCompute;
    }
    t.useFusedBwdKernel = true;
  }
  return t;
}
