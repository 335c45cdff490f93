//===- SplitTest.cpp - Tests for seeded permutations and held-out splits --===//

#include "sd/Data/Split.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <numeric>

using namespace sd::data;

namespace {

TEST(SplitTest, SeededPermutationIsAPermutationFixedBySeed) {
  std::vector<int64_t> permutation = seededPermutation(1000, 7);
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(permutation, identity);
  EXPECT_EQ(seededPermutation(1000, 7), permutation);
  EXPECT_NE(seededPermutation(1000, 8), permutation);
  EXPECT_TRUE(seededPermutation(0, 1).empty());
  EXPECT_EQ(seededPermutation(1, 1), std::vector<int64_t>{0});
  // Pinned, so that a dataset built from a seed stays the same dataset.
  EXPECT_EQ(seededPermutation(6, 0), (std::vector<int64_t>{3, 1, 5, 0, 4, 2}));
}

TEST(SplitTest, HeldoutIsStratifiedAndRounded) {
  // Classes of 50, 30 and 20 samples; 10% held out: 5, 3 and 2.
  std::vector<int64_t> labels;
  for (int64_t c : {0, 1, 2})
    labels.insert(labels.end(), c == 0 ? 50 : c == 1 ? 30 : 20, c);
  HeldoutSplit split = splitHeldout(labels, 3, 0.1, 3);
  ASSERT_EQ(split.heldout.size(), 10u);
  ASSERT_EQ(split.train.size(), 90u);
  std::vector<int64_t> perClass(3, 0);
  for (int64_t index : split.heldout)
    ++perClass[labels[index]];
  EXPECT_EQ(perClass, (std::vector<int64_t>{5, 3, 2}));
  // Every sample is in exactly one split.
  std::vector<int64_t> all = split.train;
  all.insert(all.end(), split.heldout.begin(), split.heldout.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i], static_cast<int64_t>(i));
  // Both splits are shuffled, not in the input's order.
  EXPECT_FALSE(std::is_sorted(split.train.begin(), split.train.end()));
}

TEST(SplitTest, RemaindersGoToTheLargestFractions) {
  // 3 classes of 7: 0.2 × 7 = 1.4 each, 4.2 in all: round to 4, so one
  // class gets 2 (the first, on the tie).
  std::vector<int64_t> labels;
  for (int64_t c = 0; c < 3; ++c)
    labels.insert(labels.end(), 7, c);
  HeldoutSplit split = splitHeldout(labels, 3, 0.2, 0);
  std::vector<int64_t> perClass(3, 0);
  for (int64_t index : split.heldout)
    ++perClass[labels[index]];
  EXPECT_EQ(perClass, (std::vector<int64_t>{2, 1, 1}));
  // Nothing held out.
  HeldoutSplit none = splitHeldout(labels, 3, 0.0, 0);
  EXPECT_TRUE(none.heldout.empty());
  EXPECT_EQ(none.train.size(), 21u);
}

} // namespace
