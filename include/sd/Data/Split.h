//===- Split.h - Seeded shuffles and held-out splits ------------*- C++ -*-===//
//
// Datasets are split into train and held-out samples, and stored shuffled,
// by permutations drawn from sd's counter-based generator
// (sd/Reference/Random.h), so a seed gives the same dataset on every
// platform and standard library (std::shuffle's order is the library's
// choice).
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_SPLIT_H
#define SD_DATA_SPLIT_H

#include "absl/types/span.h"

#include <cstdint>
#include <vector>

namespace sd::data {

/// A permutation of [0, n): Fisher-Yates, swapping position i (from n-1
/// down to 1) with floor(uniformAt(seed, n-1-i) × (i+1)).
std::vector<int64_t> seededPermutation(int64_t n, uint64_t seed);

/// Which samples go to which split, each list in a shuffled order.
struct HeldoutSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> heldout;
};

/// Splits the samples with class `labels` (in [0, numClasses)) into train
/// and held-out, stratified: round(fraction × n) samples are held out, the
/// classes' shares proportional to their sizes (floors, then the largest
/// remainders, lower class first on ties). Both lists follow one
/// seededPermutation(n, seed): a sample is held out when its class still
/// needs one as the permutation reaches it.
HeldoutSplit splitHeldout(absl::Span<const int64_t> labels, int64_t numClasses,
                          double fraction, uint64_t seed);

} // namespace sd::data

#endif // SD_DATA_SPLIT_H
