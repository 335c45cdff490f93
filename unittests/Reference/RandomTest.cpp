//===- RandomTest.cpp - Tests of the counter-based RNG --------------------===//

#include "sd/Reference/Random.h"
#include "sd/Reference/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace sd::ref;

namespace {

TEST(RandomTest, PhiloxKnownAnswers) {
  // Random123's kat_vectors, "philox4x32 10" lines: counter, key -> output.
  using Words = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                       {0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                       {0xa4093822, 0x299f31d0}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomTest, UniformFromPhiloxBits) {
  // Seed 0, index 0: the top 53 bits of 0x6627e8d5'e169c58d, times 2^-53.
  uint64_t bits = (uint64_t{0x6627e8d5} << 32) | 0xe169c58d;
  EXPECT_EQ(uniformAt(0, 0), std::ldexp(static_cast<double>(bits >> 11), -53));
}

TEST(RandomTest, Deterministic) {
  EXPECT_EQ(uniformAt(42, 7), uniformAt(42, 7));
  EXPECT_EQ(normalAt(42, 7), normalAt(42, 7));
  EXPECT_NE(uniformAt(42, 7), uniformAt(42, 8));
  EXPECT_NE(uniformAt(42, 7), uniformAt(43, 7));
  // Indices beyond 32 bits use the high counter word.
  EXPECT_NE(uniformAt(42, 1), uniformAt(42, (uint64_t{1} << 32) | 1));
  Tensor a = rngNormal({3, 4}, 5, 0.0, 1.0, DType::F32);
  Tensor b = rngNormal({3, 4}, 5, 0.0, 1.0, DType::F32);
  EXPECT_EQ(a.values(), b.values());
  EXPECT_NE(a.values(), rngNormal({3, 4}, 6, 0.0, 1.0, DType::F32).values());
}

TEST(RandomTest, ElementDependsOnlyOnSeedAndIndex) {
  // The same linear index gives the same value whatever the shape.
  Tensor flat = rngUniform({12}, 9, 0.0, 1.0, DType::F32);
  Tensor grid = rngUniform({3, 4}, 9, 0.0, 1.0, DType::BF16);
  EXPECT_EQ(flat.values(), grid.values());
  EXPECT_EQ(grid.dtype(), DType::BF16);
  EXPECT_EQ(grid.at({2, 1}), uniformAt(9, 9));
  Tensor n = rngNormal({2, 2}, 3, 1.0, 2.0, DType::F32);
  EXPECT_EQ(n.at({1, 0}), 1.0 + 2.0 * normalAt(3, 2));
}

TEST(RandomTest, SliceIsBlockOfFullTensor) {
  std::vector<int64_t> global = {4, 6, 5};
  Tensor full = rngNormal(global, 17, 0.5, 3.0, DType::F32);
  Tensor block =
      rngNormalSlice(global, {1, 2, 0}, {2, 3, 5}, 17, 0.5, 3.0, DType::F32);
  Tensor expected = slice(full, {1, 2, 0}, {3, 5, 5}, {1, 1, 1});
  ASSERT_EQ(block.shape(), expected.shape());
  EXPECT_EQ(block.values(), expected.values());

  // Blocks of a 2x2 "mesh" reassemble the full uniform tensor.
  std::vector<int64_t> g2 = {4, 6};
  Tensor fullU = rngUniform(g2, 23, -1.0, 1.0, DType::F32);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 2; ++c) {
      Tensor shard = rngUniformSlice(g2, {2 * r, 3 * c}, {2, 3}, 23, -1.0, 1.0,
                                     DType::F32);
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j)
          EXPECT_EQ(shard.at({i, j}), fullU.at({2 * r + i, 3 * c + j}));
    }
}

TEST(RandomTest, UniformRangeAndMoments) {
  const int64_t n = 100000;
  Tensor u = rngUniform({n}, 1234, -2.0, 3.0, DType::F32);
  double sum = 0.0, sumSq = 0.0;
  for (double v : u.values()) {
    ASSERT_GE(v, -2.0);
    ASSERT_LT(v, 3.0);
    sum += v;
    sumSq += v * v;
  }
  double mean = sum / n, var = sumSq / n - mean * mean;
  // U(-2, 3): mean 0.5, variance 25/12 = 2.0833; standard error of the mean
  // is sqrt(2.08 / 1e5) = 0.0046, so 0.03 is > 6 sigma.
  EXPECT_NEAR(mean, 0.5, 0.03);
  EXPECT_NEAR(var, 25.0 / 12, 0.05);
}

TEST(RandomTest, NormalMoments) {
  const int64_t n = 100000;
  Tensor z = rngNormal({n}, 99, 0.0, 1.0, DType::F32);
  double sum = 0.0, sumSq = 0.0, sumFourth = 0.0;
  int64_t beyond2 = 0;
  for (double v : z.values()) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sumSq += v * v;
    sumFourth += v * v * v * v;
    beyond2 += std::fabs(v) > 2.0;
  }
  double mean = sum / n, var = sumSq / n - mean * mean;
  // Standard errors: mean 0.0032, variance 0.0045, kurtosis (3) ~0.025.
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.02);
  EXPECT_NEAR(sumFourth / n, 3.0, 0.15);
  // P(|Z| > 2) = 0.0455.
  EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.0455, 0.005);

  Tensor shifted = rngNormal({n}, 99, 5.0, 0.5, DType::F32);
  EXPECT_NEAR(reduce(ReduceKind::Mean, shifted, {0})[0], 5.0, 0.01);
}

TEST(RandomTest, RankZero) {
  Tensor s = rngUniform({}, 7, 0.0, 1.0, DType::F64);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s[0], uniformAt(7, 0));
}

} // namespace
