//===- FlashAttentionTest.cpp - Tiled attention equals untiled attention --===//
//--===//
//
// flashAttention and flashAttentionBackward are checked against computations
// that know nothing of tiles: `attention` for the output, the definition of
// the log-sum-exp for lse, and the textbook softmax vector-Jacobian product
// for the gradients (itself checked against finite differences). Shapes,
// block sizes and masks are swept so that every kind of block boundary
// occurs: divisible and partial last blocks, blocks above the length,
// compute sub-blocks that do or do not divide their block.
//
//===----------------------------------------------------------------------===//

#include "ReferenceTestUtils.h"
#include "sd/Reference/Kernels.h"
#include "sd/Reference/Random.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

using namespace sd::ref;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Absolute tolerance between tiled and untiled results, whose values are of
/// order 1: only the summation order differs, so round-off is ~1e-15.
constexpr double kTol = 1e-9;

/// Standard normal f64 values from stream `seed`.
Tensor randomTensor(const std::vector<int64_t> &shape, uint64_t seed) {
  return rngNormal(shape, seed, 0.0, 1.0, DType::F64);
}

/// Whether query i of (bi, hi) may attend to key j; size-1 mask dimensions
/// broadcast as in `attention`.
bool allowedAt(const Tensor *mask, int64_t bi, int64_t hi, int64_t i,
               int64_t j) {
  if (!mask)
    return true;
  return mask->at({mask->dim(0) == 1 ? 0 : bi, mask->dim(1) == 1 ? 0 : hi, i,
                   j}) != 0.0;
}

/// An I1 mask of `shape` [B or 1, H or 1, Sq, Skv] allowing about 70% of the
/// pairs, in which query row 1 (when there is one) of every slab is fully
/// masked.
Tensor randomMask(const std::vector<int64_t> &shape, uint64_t seed) {
  Tensor mask(shape, DType::I1);
  for (int64_t n = 0; n < mask.numElements(); ++n)
    mask[n] = uniformAt(seed, n) < 0.7 ? 1.0 : 0.0;
  int64_t sq = shape[2], skv = shape[3];
  if (sq > 1)
    for (int64_t slab = 0; slab < shape[0] * shape[1]; ++slab)
      for (int64_t j = 0; j < skv; ++j)
        mask[(slab * sq + 1) * skv + j] = 0.0;
  return mask;
}

/// The keys j that query i of (bi, hi) may attend to, with their scaled
/// scores scale q_i . k_j.
struct RowScores {
  std::vector<int64_t> keys;
  std::vector<double> scores;
};

RowScores rowScores(const Tensor &q, const Tensor &k, const Tensor *mask,
                    double scale, int64_t bi, int64_t hi, int64_t i) {
  RowScores row;
  for (int64_t j = 0; j < k.dim(2); ++j) {
    if (!allowedAt(mask, bi, hi, i, j))
      continue;
    double dot = 0.0;
    for (int64_t c = 0; c < q.dim(3); ++c)
      dot += q.at({bi, hi, i, c}) * k.at({bi, hi, j, c});
    row.keys.push_back(j);
    row.scores.push_back(scale * dot);
  }
  return row;
}

/// log sum_{allowed j} exp(scale q_i . k_j) per query row, straight from the
/// definition (shifted by the row maximum); -inf for a row with no key.
Tensor directLse(const Tensor &q, const Tensor &k, const Tensor *mask,
                 double scale) {
  int64_t b = q.dim(0), h = q.dim(1), sq = q.dim(2);
  Tensor lse({b, h, sq}, DType::F64);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> logits =
            rowScores(q, k, mask, scale, bi, hi, i).scores;
        if (logits.empty()) {
          lse.at({bi, hi, i}) = -kInf;
          continue;
        }
        double top = *std::max_element(logits.begin(), logits.end());
        double sum = 0.0;
        for (double s : logits)
          sum += std::exp(s - top);
        lse.at({bi, hi, i}) = top + std::log(sum);
      }
  return lse;
}

/// The gradients of L = sum(dOut o attention(q, k, v)) by the softmax VJP of
/// the untiled computation, row by row: with P_i the softmax of row i over its
/// allowed keys, dV += P_i^T dOut_i, dP_ij = dOut_i . v_j,
/// dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'), dQ_i = scale sum_j dS_ij k_j,
/// dK_j += scale dS_ij q_i.
FlashGradients untiledGradients(const Tensor &q, const Tensor &k,
                                const Tensor &v, const Tensor *mask,
                                const Tensor &dOut, double scale) {
  int64_t b = q.dim(0), h = q.dim(1), sq = q.dim(2), d = q.dim(3);
  int64_t dv = v.dim(3);
  FlashGradients g{Tensor(q.shape(), DType::F64), Tensor(k.shape(), DType::F64),
                   Tensor(v.shape(), DType::F64)};
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        auto [keys, p] = rowScores(q, k, mask, scale, bi, hi, i);
        if (keys.empty())
          continue;
        double top = *std::max_element(p.begin(), p.end());
        double sum = 0.0;
        for (double &x : p)
          sum += (x = std::exp(x - top));
        for (double &x : p)
          x /= sum;
        std::vector<double> dp(keys.size(), 0.0);
        double pDotDp = 0.0;
        for (size_t n = 0; n < keys.size(); ++n) {
          for (int64_t c = 0; c < dv; ++c)
            dp[n] += dOut.at({bi, hi, i, c}) * v.at({bi, hi, keys[n], c});
          pDotDp += p[n] * dp[n];
        }
        for (size_t n = 0; n < keys.size(); ++n) {
          int64_t j = keys[n];
          double ds = p[n] * (dp[n] - pDotDp);
          for (int64_t c = 0; c < dv; ++c)
            g.dv.at({bi, hi, j, c}) += p[n] * dOut.at({bi, hi, i, c});
          for (int64_t c = 0; c < d; ++c) {
            g.dq.at({bi, hi, i, c}) += scale * ds * k.at({bi, hi, j, c});
            g.dk.at({bi, hi, j, c}) += scale * ds * q.at({bi, hi, i, c});
          }
        }
      }
  return g;
}

bool hasNaN(const Tensor &t) {
  return std::any_of(t.values().begin(), t.values().end(),
                     [](double x) { return std::isnan(x); });
}

/// Expects equal shapes and values within `tol` (equal infinities match).
void expectClose(const Tensor &actual, const Tensor &expected,
                 const std::string &what, double tol = kTol) {
  EXPECT_EQ(actual.shape(), expected.shape()) << what;
  EXPECT_FALSE(hasNaN(actual)) << what << ": " << actual.toString();
  EXPECT_LE(maxAbsoluteDifference(actual, expected), tol)
      << what << ": " << actual.toString() << " vs " << expected.toString();
}

void expectGradientsClose(const FlashGradients &actual,
                          const FlashGradients &expected,
                          const std::string &what, double tol = kTol) {
  expectClose(actual.dq, expected.dq, what + " dq", tol);
  expectClose(actual.dk, expected.dk, what + " dk", tol);
  expectClose(actual.dv, expected.dv, what + " dv", tol);
}

FlashBlockSizes makeBlocks(int64_t q, int64_t kvCompute, int64_t kv,
                           int64_t qDkv, int64_t kvDkv, int64_t kvDkvCompute,
                           int64_t qDq, int64_t kvDq) {
  return FlashBlockSizes{q,    kvCompute, kv,
                         qDkv, kvDkv,     kvDkvCompute,
                         qDq,  kvDq,      /*fusedBackward=*/false};
}

FlashBlockSizes withFused(FlashBlockSizes blocks, bool fused) {
  blocks.fusedBackward = fused;
  return blocks;
}

/// Tensor `x` restricted to keys [first, last) along dimension 3 (a mask) or
/// 2 (keys, values).
Tensor keySlice(const Tensor &x, int64_t dim, int64_t first, int64_t last) {
  std::vector<int64_t> start(4, 0), limit = x.shape();
  start[dim] = first;
  limit[dim] = last;
  return slice(x, start, limit, {1, 1, 1, 1});
}

//===----------------------------------------------------------------------===//
// The sweep: shapes x block sizes x masks
//===----------------------------------------------------------------------===//

struct ShapeCase {
  const char *name;
  int64_t b, h, sq, skv, d, dv;
};

const ShapeCase kShapes[] = {
    {"Divisible", 1, 2, 64, 64, 8, 8},
    {"Sq37Skv53", 2, 3, 37, 53, 8, 5},
    {"Sq53Skv37", 1, 2, 53, 37, 6, 9},
    {"Tiny", 1, 1, 3, 2, 4, 3},
};

struct BlockCase {
  const char *name;
  FlashBlockSizes blocks;
};

// Arguments: q, kvCompute, kv | qDkv, kvDkv, kvDkvCompute | qDq, kvDq.
const BlockCase kBlockCases[] = {
    // 512 everywhere: each block is clamped to the whole length.
    {"Defaults", FlashBlockSizes()},
    {"Uniform16", makeBlocks(16, 16, 16, 16, 16, 16, 16, 16)},
    {"Q16Compute8Kv32", makeBlocks(16, 8, 32, 16, 32, 8, 16, 32)},
    {"AllDifferent", makeBlocks(7, 4, 11, 9, 13, 5, 6, 10)},
    // Compute sub-blocks that leave a partial sub-block in every key block.
    {"ComputeNotDividingKv", makeBlocks(32, 12, 20, 20, 24, 10, 12, 40)},
    // Compute sub-blocks above the key block: clamped to it.
    {"ComputeAboveKv", makeBlocks(8, 64, 16, 8, 16, 64, 64, 8)},
    {"Ones", makeBlocks(1, 1, 1, 1, 1, 1, 1, 1)},
    {"WideQNarrowKv", makeBlocks(128, 2, 3, 128, 3, 2, 1, 128)},
};

enum class MaskKind { None, Full, BroadcastBatch, BroadcastHead, BroadcastAll };

const char *maskName(MaskKind kind) {
  switch (kind) {
  case MaskKind::None:
    return "NoMask";
  case MaskKind::Full:
    return "FullMask";
  case MaskKind::BroadcastBatch:
    return "BroadcastBatchMask";
  case MaskKind::BroadcastHead:
    return "BroadcastHeadMask";
  case MaskKind::BroadcastAll:
    return "BroadcastAllMask";
  }
  return "";
}

using SweepParam = std::tuple<ShapeCase, BlockCase, MaskKind>;

class RefFlashAttentionSweepTest : public testing::TestWithParam<SweepParam> {
protected:
  void SetUp() override {
    const ShapeCase &s = std::get<0>(GetParam());
    blocks = std::get<1>(GetParam()).blocks;
    q = randomTensor({s.b, s.h, s.sq, s.d}, 1);
    k = randomTensor({s.b, s.h, s.skv, s.d}, 2);
    v = randomTensor({s.b, s.h, s.skv, s.dv}, 3);
    dOut = randomTensor({s.b, s.h, s.sq, s.dv}, 4);
    scale = 1.0 / std::sqrt(static_cast<double>(s.d));
    MaskKind kind = std::get<2>(GetParam());
    if (kind == MaskKind::None)
      return;
    int64_t mb =
        kind == MaskKind::BroadcastBatch || kind == MaskKind::BroadcastAll
            ? 1
            : s.b;
    int64_t mh =
        kind == MaskKind::BroadcastHead || kind == MaskKind::BroadcastAll ? 1
                                                                          : s.h;
    maskStorage = randomMask({mb, mh, s.sq, s.skv}, 5);
    mask = &maskStorage;
  }

  FlashBlockSizes blocks;
  Tensor q, k, v, dOut, maskStorage;
  const Tensor *mask = nullptr;
  double scale = 1.0;
};

TEST_P(RefFlashAttentionSweepTest, ForwardMatchesUntiled) {
  FlashForward flash = flashAttention(q, k, v, mask, scale, blocks);
  expectClose(flash.out, attention(q, k, v, mask, scale), "out");
  expectClose(flash.lse, directLse(q, k, mask, scale), "lse");
}

TEST_P(RefFlashAttentionSweepTest, BackwardMatchesUntiledVjp) {
  FlashForward flash = flashAttention(q, k, v, mask, scale, blocks);
  FlashGradients expected = untiledGradients(q, k, v, mask, dOut, scale);
  for (bool fused : {false, true})
    expectGradientsClose(flashAttentionBackward(q, k, v, mask, flash.out,
                                                flash.lse, dOut, scale,
                                                withFused(blocks, fused)),
                         expected, fused ? "fused" : "unfused");
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, RefFlashAttentionSweepTest,
    testing::Combine(testing::ValuesIn(kShapes), testing::ValuesIn(kBlockCases),
                     testing::Values(MaskKind::None, MaskKind::Full,
                                     MaskKind::BroadcastBatch,
                                     MaskKind::BroadcastHead,
                                     MaskKind::BroadcastAll)),
    [](const testing::TestParamInfo<SweepParam> &info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::get<1>(info.param).name + "_" +
             maskName(std::get<2>(info.param));
    });

//===----------------------------------------------------------------------===//
// Individual properties
//===----------------------------------------------------------------------===//

TEST(RefFlashAttentionTest, MatchesHandComputedExample) {
  // The example of LinalgTest.AttentionWithMask: scale * q = [1, 0] and
  // k = [0, ln 2, ln 3]. Row 0 has weights 1, 2, 3 (lse = ln 6), row 1 equal
  // weights (lse = ln 3); masked, row 0 keeps keys 0, 1 (ln 3) and row 1 keys
  // 1, 2 (ln 2).
  Tensor q({1, 1, 2, 1}, DType::F64, {2, 0});
  Tensor k({1, 1, 3, 1}, DType::F64, {0, std::log(2.0), std::log(3.0)});
  Tensor v({1, 1, 3, 2}, DType::F64, {1, 0, 0, 1, 10, 10});
  Tensor mask({1, 1, 2, 3}, DType::I1, {1, 1, 0, 0, 1, 1});
  for (int64_t size : {1, 2, 4}) {
    FlashBlockSizes blocks = makeBlocks(size, 1, size, size, size, 1, 1, size);
    FlashForward plain = flashAttention(q, k, v, nullptr, 0.5, blocks);
    expectNear(plain.out, {1, 1, 2, 2},
               {31.0 / 6, 32.0 / 6, 11.0 / 3, 11.0 / 3});
    expectNear(plain.lse, {1, 1, 2}, {std::log(6.0), std::log(3.0)});
    FlashForward masked = flashAttention(q, k, v, &mask, 0.5, blocks);
    expectNear(masked.out, {1, 1, 2, 2}, {1.0 / 3, 2.0 / 3, 5, 5.5});
    expectNear(masked.lse, {1, 1, 2}, {std::log(3.0), std::log(2.0)});
  }
}

TEST(RefFlashAttentionTest, BackwardOracleMatchesFiniteDifferences) {
  // Checks the test's own oracle, and flash directly, against central
  // differences of L = sum(dOut o attention(q, k, v)) on a tiny masked case.
  // The differences carry O(h^2) truncation and O(eps / h) round-off error,
  // hence the looser tolerance of this test only.
  Tensor q = randomTensor({1, 2, 3, 2}, 11);
  Tensor k = randomTensor({1, 2, 4, 2}, 12);
  Tensor v = randomTensor({1, 2, 4, 3}, 13);
  Tensor dOut = randomTensor({1, 2, 3, 3}, 14);
  Tensor mask({1, 2, 3, 4}, DType::I1, {1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1,
                                        0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0});
  double scale = 0.8;
  auto loss = [&](const Tensor &qx, const Tensor &kx, const Tensor &vx) {
    Tensor out = attention(qx, kx, vx, &mask, scale);
    double sum = 0.0;
    for (int64_t n = 0; n < out.numElements(); ++n)
      sum += dOut[n] * out[n];
    return sum;
  };
  const double h = 1e-5;
  auto numeric = [&](int operand) {
    Tensor inputs[3] = {q, k, v};
    Tensor grad(inputs[operand].shape(), DType::F64);
    for (int64_t n = 0; n < grad.numElements(); ++n) {
      Tensor plus[3] = {q, k, v}, minus[3] = {q, k, v};
      plus[operand][n] += h;
      minus[operand][n] -= h;
      grad[n] = (loss(plus[0], plus[1], plus[2]) -
                 loss(minus[0], minus[1], minus[2])) /
                (2 * h);
    }
    return grad;
  };
  FlashGradients fd{numeric(0), numeric(1), numeric(2)};
  expectGradientsClose(untiledGradients(q, k, v, &mask, dOut, scale), fd,
                       "oracle vs finite differences", 1e-8);
  FlashBlockSizes blocks = makeBlocks(2, 1, 3, 2, 3, 2, 1, 3);
  FlashForward flash = flashAttention(q, k, v, &mask, scale, blocks);
  for (bool fused : {false, true})
    expectGradientsClose(flashAttentionBackward(q, k, v, &mask, flash.out,
                                                flash.lse, dOut, scale,
                                                withFused(blocks, fused)),
                         fd, "flash vs finite differences", 1e-8);
}

TEST(RefFlashAttentionTest, FullyMaskedRowsGiveZerosMinusInfAndNoNaN) {
  // Batch 0: query rows 0 and 4 and key 2 are fully masked; batch 1: the whole
  // mask is zero (the mask broadcasts over heads).
  int64_t sq = 9, skv = 7;
  Tensor q = randomTensor({2, 2, sq, 4}, 21);
  Tensor k = randomTensor({2, 2, skv, 4}, 22);
  Tensor v = randomTensor({2, 2, skv, 3}, 23);
  Tensor dOut = randomTensor({2, 2, sq, 3}, 24);
  Tensor mask({2, 1, sq, skv}, DType::I1);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j)
      mask.at({0, 0, i, j}) = (i == 0 || i == 4 || j == 2) ? 0.0 : 1.0;
  for (const FlashBlockSizes &base :
       {makeBlocks(4, 2, 3, 2, 3, 2, 4, 3), makeBlocks(1, 1, 1, 1, 1, 1, 1, 1),
        FlashBlockSizes()}) {
    FlashForward flash = flashAttention(q, k, v, &mask, 0.5, base);
    expectClose(flash.out, attention(q, k, v, &mask, 0.5), "out");
    expectClose(flash.lse, directLse(q, k, &mask, 0.5), "lse");
    FlashGradients expected = untiledGradients(q, k, v, &mask, dOut, 0.5);
    for (int64_t hi = 0; hi < 2; ++hi) {
      for (int64_t i : {0, 4}) {
        EXPECT_EQ(flash.lse.at({0, hi, i}), -kInf);
        for (int64_t c = 0; c < 3; ++c)
          EXPECT_EQ(flash.out.at({0, hi, i, c}), 0.0);
      }
      for (int64_t i = 0; i < sq; ++i)
        EXPECT_EQ(flash.lse.at({1, hi, i}), -kInf);
    }
    for (bool fused : {false, true}) {
      FlashGradients g =
          flashAttentionBackward(q, k, v, &mask, flash.out, flash.lse, dOut,
                                 0.5, withFused(base, fused));
      expectGradientsClose(g, expected, fused ? "fused" : "unfused");
      // Exactly zero, not merely small: masked pairs contribute nothing.
      for (int64_t hi = 0; hi < 2; ++hi) {
        for (int64_t c = 0; c < 4; ++c) {
          for (int64_t i : {0, 4})
            EXPECT_EQ(g.dq.at({0, hi, i, c}), 0.0);
          EXPECT_EQ(g.dk.at({0, hi, 2, c}), 0.0);
        }
        for (int64_t c = 0; c < 3; ++c)
          EXPECT_EQ(g.dv.at({0, hi, 2, c}), 0.0);
      }
      for (const Tensor *t : {&g.dq, &g.dk, &g.dv})
        for (int64_t n = t->numElements() / 2; n < t->numElements(); ++n)
          ASSERT_EQ((*t)[n], 0.0) << "batch 1 element " << n;
    }
  }
}

TEST(RefFlashAttentionTest, NoKeysAtAll) {
  Tensor q = randomTensor({1, 1, 5, 2}, 31);
  Tensor k({1, 1, 0, 2}, DType::F64);
  Tensor v({1, 1, 0, 3}, DType::F64);
  FlashBlockSizes blocks = makeBlocks(2, 2, 2, 2, 2, 2, 2, 2);
  FlashForward flash = flashAttention(q, k, v, nullptr, 1.0, blocks);
  expectNear(flash.out, {1, 1, 5, 3}, std::vector<double>(15, 0.0));
  ASSERT_EQ(flash.lse.shape(), std::vector<int64_t>({1, 1, 5}));
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(flash.lse[i], -kInf);
  Tensor dOut = randomTensor({1, 1, 5, 3}, 32);
  FlashGradients g = flashAttentionBackward(q, k, v, nullptr, flash.out,
                                            flash.lse, dOut, 1.0, blocks);
  expectNear(g.dq, {1, 1, 5, 2}, std::vector<double>(10, 0.0));
  EXPECT_EQ(g.dk.shape(), k.shape());
  EXPECT_EQ(g.dv.shape(), v.shape());
}

TEST(RefFlashAttentionTest, OnlineSoftmaxRescalesLargeLogits) {
  // Logits near 1000 would overflow exp() unshifted. Along the keys they rise
  // for the first 30 keys (each key block raises the running maximum, so the
  // accumulator is rescaled) and then fall (later blocks leave it alone).
  int64_t sq = 11, skv = 53;
  Tensor q({1, 1, sq, 1}, DType::F64);
  Tensor k({1, 1, skv, 1}, DType::F64);
  for (int64_t i = 0; i < sq; ++i)
    q[i] = 1.0 + 0.001 * i;
  for (int64_t j = 0; j < skv; ++j)
    k[j] = 1000.0 + 0.1 * (j < 30 ? j : 60 - j);
  Tensor v = randomTensor({1, 1, skv, 4}, 41);
  Tensor dOut = randomTensor({1, 1, sq, 4}, 42);
  FlashBlockSizes blocks = makeBlocks(4, 3, 8, 5, 8, 3, 4, 7);
  FlashForward flash = flashAttention(q, k, v, nullptr, 1.0, blocks);
  expectClose(flash.out, attention(q, k, v, nullptr, 1.0), "out");
  // lse is about 1000: compare relative to that magnitude.
  EXPECT_LE(maxRelativeDifference(flash.lse, directLse(q, k, nullptr, 1.0)),
            1e-12);
  // dK scales with q (~1), dQ with k (~1000): compare relative, floor 1.
  FlashGradients expected = untiledGradients(q, k, v, nullptr, dOut, 1.0);
  for (bool fused : {false, true}) {
    FlashGradients g =
        flashAttentionBackward(q, k, v, nullptr, flash.out, flash.lse, dOut,
                               1.0, withFused(blocks, fused));
    EXPECT_LE(maxRelativeDifference(g.dq, expected.dq, 1.0), kTol);
    EXPECT_LE(maxRelativeDifference(g.dk, expected.dk, 1.0), kTol);
    EXPECT_LE(maxRelativeDifference(g.dv, expected.dv, 1.0), kTol);
  }
}

/// A [1, 1, Sq, Skv] mask for the key-split tests, split at `split`: row 1
/// attends to nothing, row 2 only to the second part, row 3 only to the first,
/// the rest to about 70% of the keys.
Tensor splitTestMask(int64_t sq, int64_t skv, int64_t split) {
  Tensor mask = randomMask({1, 1, sq, skv}, 51);
  for (int64_t j = 0; j < skv; ++j) {
    mask.at({0, 0, 2, j}) = j < split ? 0.0 : 1.0;
    mask.at({0, 0, 3, j}) = j < split ? 1.0 : 0.0;
  }
  return mask;
}

TEST(RefFlashAttentionTest, BackwardOverKeySlicesSumsToFullGradients) {
  // The backward of the keys [0, split) and [split, Skv) with the full
  // forward's out and lse: dq adds up, dk and dv concatenate (what ring
  // attention's backward relies on).
  int64_t b = 2, h = 2, sq = 37, skv = 53;
  Tensor q = randomTensor({b, h, sq, 8}, 61);
  Tensor k = randomTensor({b, h, skv, 8}, 62);
  Tensor v = randomTensor({b, h, skv, 5}, 63);
  Tensor dOut = randomTensor({b, h, sq, 5}, 64);
  double scale = 0.35;
  for (int64_t split : {20, 26, 32}) {
    SCOPED_TRACE("split " + std::to_string(split));
    Tensor mask = splitTestMask(sq, skv, split);
    for (const FlashBlockSizes &base :
         {makeBlocks(16, 8, 32, 16, 32, 8, 16, 32),
          makeBlocks(7, 4, 11, 9, 13, 5, 6, 10)})
      for (bool fused : {false, true}) {
        FlashBlockSizes blocks = withFused(base, fused);
        FlashForward full = flashAttention(q, k, v, &mask, scale, blocks);
        FlashGradients whole = flashAttentionBackward(
            q, k, v, &mask, full.out, full.lse, dOut, scale, blocks);
        expectGradientsClose(
            whole, untiledGradients(q, k, v, &mask, dOut, scale), "whole");
        FlashGradients parts[2];
        for (int part = 0; part < 2; ++part) {
          int64_t first = part == 0 ? 0 : split, last = part == 0 ? split : skv;
          Tensor maskPart = keySlice(mask, 3, first, last);
          parts[part] = flashAttentionBackward(
              q, keySlice(k, 2, first, last), keySlice(v, 2, first, last),
              &maskPart, full.out, full.lse, dOut, scale, blocks);
        }
        expectClose(binary(BinaryKind::Add, parts[0].dq, parts[1].dq), whole.dq,
                    "dq sum");
        expectClose(concat({&parts[0].dk, &parts[1].dk}, 2), whole.dk,
                    "dk concat");
        expectClose(concat({&parts[0].dv, &parts[1].dv}, 2), whole.dv,
                    "dv concat");
      }
  }
}

TEST(RefFlashAttentionTest, LogSumExpMergeOfKeySlicesEqualsFullForward) {
  // Ring attention's merge of two partial forwards:
  //   lse = logaddexp(l1, l2), out = o1 exp(l1 - lse) + o2 exp(l2 - lse),
  // with the convention that a row empty in both parts stays 0 / -inf.
  int64_t b = 2, h = 3, sq = 37, skv = 53, dv = 5;
  Tensor q = randomTensor({b, h, sq, 8}, 71);
  Tensor k = randomTensor({b, h, skv, 8}, 72);
  Tensor v = randomTensor({b, h, skv, dv}, 73);
  double scale = 0.35;
  FlashBlockSizes blocks = makeBlocks(16, 8, 32, 16, 32, 8, 16, 32);
  for (int64_t split : {20, 26}) {
    SCOPED_TRACE("split " + std::to_string(split));
    Tensor mask = splitTestMask(sq, skv, split);
    Tensor mask1 = keySlice(mask, 3, 0, split);
    Tensor mask2 = keySlice(mask, 3, split, skv);
    FlashForward p1 =
        flashAttention(q, keySlice(k, 2, 0, split), keySlice(v, 2, 0, split),
                       &mask1, scale, blocks);
    FlashForward p2 =
        flashAttention(q, keySlice(k, 2, split, skv),
                       keySlice(v, 2, split, skv), &mask2, scale, blocks);
    FlashForward merged{Tensor({b, h, sq, dv}, DType::F64),
                        Tensor({b, h, sq}, DType::F64)};
    for (int64_t row = 0; row < b * h * sq; ++row) {
      double l1 = p1.lse[row], l2 = p2.lse[row];
      double top = std::max(l1, l2);
      double lse =
          top == -kInf
              ? -kInf
              : top + std::log(std::exp(l1 - top) + std::exp(l2 - top));
      merged.lse[row] = lse;
      if (lse == -kInf)
        continue;
      for (int64_t c = 0; c < dv; ++c)
        merged.out[row * dv + c] = p1.out[row * dv + c] * std::exp(l1 - lse) +
                                   p2.out[row * dv + c] * std::exp(l2 - lse);
    }
    FlashForward full = flashAttention(q, k, v, &mask, scale, blocks);
    expectClose(merged.out, full.out, "merged out");
    expectClose(merged.lse, full.lse, "merged lse");
    expectClose(merged.out, attention(q, k, v, &mask, scale), "vs attention");
    // Row 2 attends only to the second part and row 3 only to the first.
    EXPECT_EQ(p1.lse.at({0, 0, 2}), -kInf);
    EXPECT_EQ(p2.lse.at({0, 0, 3}), -kInf);
  }
}

TEST(RefFlashAttentionTest, ResultDTypes) {
  // out and lse take q's dtype; each gradient its operand's. Values are not
  // rounded (the evaluator driver does that).
  Tensor q = randomTensor({1, 1, 5, 3}, 81);
  Tensor k = randomTensor({1, 1, 6, 3}, 82);
  Tensor v = randomTensor({1, 1, 6, 2}, 83);
  Tensor dOut = randomTensor({1, 1, 5, 2}, 84);
  Tensor qF32 = q, kBf16 = k;
  qF32.setDType(DType::F32);
  kBf16.setDType(DType::BF16);
  FlashBlockSizes blocks = makeBlocks(2, 2, 4, 2, 4, 2, 2, 4);
  FlashForward flash = flashAttention(qF32, kBf16, v, nullptr, 0.5, blocks);
  EXPECT_EQ(flash.out.dtype(), DType::F32);
  EXPECT_EQ(flash.lse.dtype(), DType::F32);
  expectClose(flash.out, attention(q, k, v, nullptr, 0.5), "out");
  FlashGradients g = flashAttentionBackward(qF32, kBf16, v, nullptr, flash.out,
                                            flash.lse, dOut, 0.5, blocks);
  EXPECT_EQ(g.dq.dtype(), DType::F32);
  EXPECT_EQ(g.dk.dtype(), DType::BF16);
  EXPECT_EQ(g.dv.dtype(), DType::F64);
  expectGradientsClose(g, untiledGradients(q, k, v, nullptr, dOut, 0.5),
                       "gradients");
}

} // namespace
