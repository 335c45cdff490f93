//===- FlashTilingTest.cpp - flash-attention block sizes ------------------===//
//
// completeFlashTiling on plain numbers: the derived forward sizes fit the
// cache as sd-tile-attention's description says, backward sizes follow the
// forward ones, given sizes stay, and the fused dQ is chosen only when
// every size is derived and the keys span at most two dK/dV blocks.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/FlashTiling.h"

#include <gtest/gtest.h>

#include <vector>

using mlir::sd::completeFlashTiling;
using mlir::sd::FlashTiling;

namespace {

/// The bytes of a forward work item's tiles, as the pass's description
/// gives them.
int64_t tileBytes(int64_t bq, int64_t bkv, int64_t d, int64_t dv) {
  return 4 * (bq * d + bq * dv + bq * bkv + bkv * (d + dv));
}

/// The eight sizes in MaxDiffusion's order.
std::vector<int64_t> sizesOf(const FlashTiling &t) {
  return {t.blockQ,     t.blockKvCompute, t.blockKv,
          t.blockQDkv,  t.blockKvDkv,     t.blockKvDkvCompute,
          t.blockQDq,   t.blockKvDq};
}

TEST(FlashTilingTest, DerivedSizesFitHalfTheCache) {
  for (int64_t cache : {int64_t(256) << 10, int64_t(1) << 20,
                        int64_t(2) << 20, int64_t(32) << 20}) {
    for (int64_t d : {32, 64, 128}) {
      SCOPED_TRACE(std::to_string(cache) + " bytes, head_dim " +
                   std::to_string(d));
      FlashTiling t = completeFlashTiling({}, d, d, cache);
      EXPECT_EQ(t.blockQ, t.blockKvCompute);
      EXPECT_GE(t.blockQ, 16);
      EXPECT_LE(t.blockQ, 512);
      // A power of two, the largest that fits (or 512).
      EXPECT_EQ(t.blockQ & (t.blockQ - 1), 0);
      if (t.blockQ > 16) {
        EXPECT_LE(tileBytes(t.blockQ, t.blockQ, d, d), cache / 2);
      }
      if (t.blockQ < 512) {
        EXPECT_GT(tileBytes(2 * t.blockQ, 2 * t.blockQ, d, d), cache / 2);
      }
      // Whole score tiles per K/V block, at most 4,096 keys.
      EXPECT_EQ(t.blockKv % t.blockKvCompute, 0);
      EXPECT_LE(t.blockKv, 4096);
      EXPECT_FALSE(t.useFusedBwdKernel);
    }
  }
}

TEST(FlashTilingTest, OneMebibyteAtHeadDim64) {
  // The figures sd-tile-attention.mlir checks in IR.
  EXPECT_EQ(sizesOf(completeFlashTiling({}, 64, 64, 1 << 20)),
            (std::vector<int64_t>{256, 256, 1024, 256, 1024, 256, 256, 1024}));
}

TEST(FlashTilingTest, BackwardSizesFollowForwardOnes) {
  // block_q, block_kv_compute, block_kv and block_kv_dq given.
  FlashTiling given{64, 32, 128, 0, 0, 0, 0, 96, false};
  FlashTiling t = completeFlashTiling(given, 64, 64, 1 << 20, 4096);
  EXPECT_EQ(sizesOf(t),
            (std::vector<int64_t>{64, 32, 128, 64, 128, 32, 64, 96}));
  // A size was given: the fused dQ stays as given (off).
  EXPECT_FALSE(t.useFusedBwdKernel);
}

TEST(FlashTilingTest, FusedDqWithAtMostTwoKeyBlocks) {
  // Two derived dK/dV blocks of 1,024 keys: fused as derived.
  FlashTiling t = completeFlashTiling({}, 64, 64, 1 << 20, 2048);
  EXPECT_EQ(t.blockKvDkv, 1024);
  EXPECT_TRUE(t.useFusedBwdKernel);
  FlashTiling short_ = completeFlashTiling({}, 64, 64, 1 << 20, 77);
  EXPECT_EQ(short_.blockKvDkv, 1024);
  EXPECT_TRUE(short_.useFusedBwdKernel);
  // Longer keys: the dK/dV block grows to half of them, in whole
  // sub-blocks of block_kv_dkv_compute (256), so that there are two.
  FlashTiling longer = completeFlashTiling({}, 64, 64, 1 << 20, 2049);
  EXPECT_EQ(longer.blockKvDkvCompute, 256);
  EXPECT_EQ(longer.blockKvDkv, 1280);
  EXPECT_TRUE(longer.useFusedBwdKernel);
  FlashTiling longest = completeFlashTiling({}, 64, 64, 1 << 20, 16384);
  EXPECT_EQ(longest.blockKvDkv, 8192);
  EXPECT_TRUE(longest.useFusedBwdKernel);
  // The other sizes stay derived from the cache alone.
  EXPECT_EQ(longest.blockKv, t.blockKv);
  EXPECT_EQ(longest.blockKvDq, t.blockKvDq);
  // Unknown key length: no choice made.
  FlashTiling unknown = completeFlashTiling({}, 64, 64, 1 << 20);
  EXPECT_FALSE(unknown.useFusedBwdKernel);
  EXPECT_EQ(unknown.blockKvDkv, 1024);
  // A size given: nothing changes but the fill-in; asked for, the fused dQ
  // stays on whatever the length.
  FlashTiling given;
  given.blockKv = 512;
  FlashTiling kept = completeFlashTiling(given, 64, 64, 1 << 20, 65536);
  EXPECT_EQ(kept.blockKvDkv, 512);
  EXPECT_FALSE(kept.useFusedBwdKernel);
  FlashTiling fused;
  fused.useFusedBwdKernel = true;
  EXPECT_TRUE(
      completeFlashTiling(fused, 64, 64, 1 << 20, 65536).useFusedBwdKernel);
}

} // namespace
