//===- Split.cpp - Seeded shuffles and held-out splits --------------------===//

#include "sd/Data/Split.h"

#include "sd/Reference/Random.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sd::data {

std::vector<int64_t> seededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> permutation(static_cast<size_t>(n));
  std::iota(permutation.begin(), permutation.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    double u = ref::uniformAt(seed, static_cast<uint64_t>(n - 1 - i));
    int64_t j = std::min(i, static_cast<int64_t>(u * static_cast<double>(i + 1)));
    std::swap(permutation[i], permutation[j]);
  }
  return permutation;
}

HeldoutSplit splitHeldout(absl::Span<const int64_t> labels, int64_t numClasses,
                          double fraction, uint64_t seed) {
  int64_t n = static_cast<int64_t>(labels.size());
  std::vector<int64_t> classSizes(static_cast<size_t>(numClasses), 0);
  for (int64_t label : labels)
    ++classSizes[label];

  // Each class's share of the held-out samples: the floor of its quota,
  // plus one for the largest remainders until the total is reached.
  int64_t total = std::llround(fraction * static_cast<double>(n));
  std::vector<int64_t> quota(classSizes.size());
  std::vector<double> remainder(classSizes.size());
  int64_t assigned = 0;
  for (size_t c = 0; c < classSizes.size(); ++c) {
    double exact = fraction * static_cast<double>(classSizes[c]);
    quota[c] = static_cast<int64_t>(std::floor(exact));
    remainder[c] = exact - static_cast<double>(quota[c]);
    assigned += quota[c];
  }
  std::vector<size_t> order(classSizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return remainder[a] > remainder[b];
  });
  for (size_t k = 0; assigned < total && k < order.size(); ++k)
    if (quota[order[k]] < classSizes[order[k]]) {
      ++quota[order[k]];
      ++assigned;
    }

  HeldoutSplit split;
  for (int64_t index : seededPermutation(n, seed)) {
    int64_t &left = quota[labels[index]];
    if (left > 0) {
      --left;
      split.heldout.push_back(index);
    } else {
      split.train.push_back(index);
    }
  }
  return split;
}

} // namespace sd::data
