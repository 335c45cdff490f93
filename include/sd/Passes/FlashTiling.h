//===- FlashTiling.h - Flash-attention block sizes --------------*- C++ -*-===//
//
// The block sizes of a tiled attention: given where the user left sizes
// open, the sizes that keep a work item's tiles in the per-core cache. Plain
// data, no IR, so that the arithmetic has tests of its own.
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_FLASHTILING_H
#define SD_PASSES_FLASHTILING_H

#include <cstdint>

namespace mlir::sd {

/// MaxDiffusion's flash_block_sizes; 0 marks a size to fill in.
struct FlashTiling {
  int64_t blockQ = 0, blockKvCompute = 0, blockKv = 0;
  int64_t blockQDkv = 0, blockKvDkv = 0, blockKvDkvCompute = 0;
  int64_t blockQDq = 0, blockKvDq = 0;
  bool useFusedBwdKernel = false;
};

/// The per-core L2 cache of this machine in bytes: sysconf, else sysfs,
/// else 1 MiB.
int64_t hostL2CacheBytes();

/// `requested` with every 0 filled in for attention with head_dims `d` and
/// `dv` on a core with `cacheBytes` of L2 (> 0): forward sizes derived (see
/// sd-tile-attention's description), then each backward size from its
/// forward one. When every size is derived and the key length `skv` is
/// known (> 0), the fused dQ is chosen, with block_kv_dkv grown to
/// ⌈skv / 2⌉ (rounded up to whole block_kv_dkv_compute blocks) where the
/// keys would span more than two dK/dV blocks, so that its partials (one dQ
/// per key block) stay at most twice dQ.
FlashTiling completeFlashTiling(FlashTiling requested, int64_t d, int64_t dv,
                                int64_t cacheBytes, int64_t skv = 0);

} // namespace mlir::sd

#endif // SD_PASSES_FLASHTILING_H
