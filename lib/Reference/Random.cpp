//===- Random.cpp - Counter-based random numbers --------------------------===//

#include "sd/Reference/Random.h"

#include "KernelsInternal.h"

#include <cassert>
#include <cmath>

namespace sd::ref {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                   std::array<uint32_t, 2> key) {
  // Round multipliers and Weyl key increments from the Philox paper.
  const uint64_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  const uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  std::array<uint32_t, 4> c = counter;
  std::array<uint32_t, 2> k = key;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kWeyl0;
      k[1] += kWeyl1;
    }
    uint64_t p0 = kMul0 * c[0], p1 = kMul1 * c[2];
    auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
    auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
    c = {hi(p1) ^ c[1] ^ k[0], lo(p1), hi(p0) ^ c[3] ^ k[1], lo(p0)};
  }
  return c;
}

/// Uniform in [0, 1) from Philox on stream `stream`, built from 53 random
/// bits so every value is an exact multiple of 2^-53.
static double uniformOnStream(uint64_t seed, uint64_t index, uint32_t stream) {
  std::array<uint32_t, 4> out = philox4x32(
      {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream,
       0},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  return std::ldexp(static_cast<double>(bits >> 11), -53);
}

double uniformAt(uint64_t seed, uint64_t index) {
  return uniformOnStream(seed, index, /*stream=*/0);
}

uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t deriveSeed(uint64_t seed, std::string_view key) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : key) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return splitMix64(seed ^ splitMix64(hash));
}

double normalAt(uint64_t seed, uint64_t index) {
  const double kPi = 3.14159265358979323846;
  double u1 = uniformOnStream(seed, index, /*stream=*/1);
  double u2 = uniformOnStream(seed, index, /*stream=*/2);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * kPi * u2);
}

/// Fills the block at `offsets` of `localShape` of a `globalShape` tensor with
/// `valueAt(global row-major index)`.
template <typename ValueAt>
static Tensor generateBlock(const std::vector<int64_t> &globalShape,
                            const std::vector<int64_t> &offsets,
                            const std::vector<int64_t> &localShape, DType dtype,
                            ValueAt valueAt) {
  assert(globalShape.size() == offsets.size() &&
         globalShape.size() == localShape.size() && "block rank mismatch");
  std::vector<int64_t> globalStrides = rowMajorStrides(globalShape);
  int64_t base = 0;
  for (size_t d = 0; d < globalShape.size(); ++d) {
    assert(offsets[d] >= 0 && offsets[d] + localShape[d] <= globalShape[d] &&
           "block exceeds the global shape");
    base += offsets[d] * globalStrides[d];
  }
  Tensor result(localShape, dtype);
  detail::StridedWalker walk(localShape, {globalStrides}, {base});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i)
    result[i] = valueAt(static_cast<uint64_t>(walk.offset(0)));
  return result;
}

Tensor rngUniformSlice(const std::vector<int64_t> &globalShape,
                       const std::vector<int64_t> &offsets,
                       const std::vector<int64_t> &localShape, uint64_t seed,
                       double low, double high, DType dtype) {
  return generateBlock(
      globalShape, offsets, localShape, dtype,
      [&](uint64_t i) { return low + (high - low) * uniformAt(seed, i); });
}

Tensor rngNormalSlice(const std::vector<int64_t> &globalShape,
                      const std::vector<int64_t> &offsets,
                      const std::vector<int64_t> &localShape, uint64_t seed,
                      double mean, double stddev, DType dtype) {
  return generateBlock(
      globalShape, offsets, localShape, dtype,
      [&](uint64_t i) { return mean + stddev * normalAt(seed, i); });
}

Tensor rngUniform(const std::vector<int64_t> &shape, uint64_t seed, double low,
                  double high, DType dtype) {
  return rngUniformSlice(shape, std::vector<int64_t>(shape.size(), 0), shape,
                         seed, low, high, dtype);
}

Tensor rngNormal(const std::vector<int64_t> &shape, uint64_t seed, double mean,
                 double stddev, DType dtype) {
  return rngNormalSlice(shape, std::vector<int64_t>(shape.size(), 0), shape,
                        seed, mean, stddev, dtype);
}

} // namespace sd::ref
