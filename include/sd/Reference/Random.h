//===- Random.h - Counter-based random numbers ------------------*- C++ -*-===//
//
// Random tensors (noise, timesteps, parameter initialization) must come out
// identical whatever the device mesh: a device that owns a block of a tensor
// has to produce exactly the values the single-device program produces for
// that block. A counter-based generator makes this trivial: the value at
// global row-major index i is a pure function of (seed, i), so any block can
// be generated on its own, in any order, with no shared state.
//
// The generator is Philox-4x32-10 (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC'11; the Random123 library, also used by cuRAND and
// PyTorch on GPUs): the 128-bit counter is (index low word, index high word,
// stream, 0) and the 64-bit key is the seed. `stream` separates the uniform
// draws from the two draws behind each normal, so they are independent.
//
//===----------------------------------------------------------------------===//

#ifndef SD_REFERENCE_RANDOM_H
#define SD_REFERENCE_RANDOM_H

#include "sd/Reference/Tensor.h"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sd::ref {

/// The Philox-4x32 bijection with 10 rounds on `counter` under `key`; matches
/// the Random123 known-answer vectors. Exposed for those tests.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                   std::array<uint32_t, 2> key);

/// Uniform double in [0, 1) for element `index` of the stream named `seed`:
/// the top 53 bits of the first two Philox output words, times 2^-53.
double uniformAt(uint64_t seed, uint64_t index);

/// SplitMix64's finalizer: a well-mixed 64-bit key from `x`, for deriving
/// the seed of one stream from a seed and a tag (nearby inputs give
/// unrelated keys).
uint64_t splitMix64(uint64_t x);

/// The seed of the stream named `key` under the run's `seed`:
/// splitMix64(seed ^ splitMix64(fnv1a64(key))), with FNV-1a's 64-bit hash
/// of the key's bytes (sd/Evaluator/Evaluator.h says which key each
/// argument draws from).
uint64_t deriveSeed(uint64_t seed, std::string_view key);

/// Standard normal double for element `index` of stream `seed`, by Box-Muller
/// (cosine branch) from two independent uniforms u1, u2 that Philox derives
/// from (seed, index) on streams 1 and 2:
///   sqrt(-2 ln(1 - u1)) * cos(2 pi u2)     (1 - u1 lies in (0, 1]).
double normalAt(uint64_t seed, uint64_t index);

/// A tensor of `shape` whose element i is low + (high - low) * uniformAt(seed,
/// i). Values are not rounded to `dtype` (the evaluator driver does it).
Tensor rngUniform(const std::vector<int64_t> &shape, uint64_t seed, double low,
                  double high, DType dtype);

/// A tensor of `shape` whose element i is mean + stddev * normalAt(seed, i).
Tensor rngNormal(const std::vector<int64_t> &shape, uint64_t seed, double mean,
                 double stddev, DType dtype);

/// The block of `rngUniform(globalShape, ...)` that starts at `offsets` and
/// has shape `localShape`, generated without materializing the full tensor.
/// This is how a device produces its shard of a random tensor.
Tensor rngUniformSlice(const std::vector<int64_t> &globalShape,
                       const std::vector<int64_t> &offsets,
                       const std::vector<int64_t> &localShape, uint64_t seed,
                       double low, double high, DType dtype);

/// The block of `rngNormal(globalShape, ...)` at `offsets` of `localShape`.
Tensor rngNormalSlice(const std::vector<int64_t> &globalShape,
                      const std::vector<int64_t> &offsets,
                      const std::vector<int64_t> &localShape, uint64_t seed,
                      double mean, double stddev, DType dtype);

} // namespace sd::ref

#endif // SD_REFERENCE_RANDOM_H
