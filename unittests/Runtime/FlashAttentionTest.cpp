//===- FlashAttentionTest.cpp - FlashAttention-2 against double math ------===//
//
// The f32 tiled kernels are compared with a plain double-precision attention
// written here: the forward's out and lse, and the backward's dq, dk, dv
// against the analytic gradient (the softmax VJP). Block sizes are chosen so
// that blocks do not divide the lengths, exceed them, or split K/V blocks
// into compute sub-blocks; masks broadcast and mask whole rows and tiles.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"
#include "sd/Runtime/Runtime.h"

#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace sd::rt::kernels {
namespace {

constexpr double kTol = 1e-4;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Shape {
  int64_t b, h, sq, skv, d, dv;
};

/// A problem's operands. `mask` is empty when unmasked.
struct Inputs {
  Shape shape;
  std::vector<float> q, k, v, dOut, mask;
  int64_t maskB = 1, maskH = 1;
  double scale;
  const float *maskData() const { return mask.empty() ? nullptr : mask.data(); }
};

using testutil::randomFloats;

/// Random operands; with `maskB` > 0 a mask of [maskB, maskH, Sq, Skv] that
/// drops a third of the keys at random, all keys of query row 1 of the first
/// mask head, and the second half of the keys for the first half of the
/// queries (so that whole tiles are masked).
Inputs makeInputs(Shape s, int64_t maskB = 0, int64_t maskH = 0,
                  uint32_t seed = 1) {
  Inputs in;
  in.shape = s;
  in.q = randomFloats(s.b * s.h * s.sq * s.d, seed, -2.0f, 2.0f);
  in.k = randomFloats(s.b * s.h * s.skv * s.d, seed + 1, -2.0f, 2.0f);
  in.v = randomFloats(s.b * s.h * s.skv * s.dv, seed + 2, -1.0f, 1.0f);
  in.dOut = randomFloats(s.b * s.h * s.sq * s.dv, seed + 3, -1.0f, 1.0f);
  in.scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.d, 1)));
  if (maskB > 0) {
    in.maskB = maskB;
    in.maskH = maskH;
    in.mask.resize(static_cast<size_t>(maskB * maskH * s.sq * s.skv));
    std::mt19937 gen(seed + 4);
    for (int64_t head = 0; head < maskB * maskH; ++head)
      for (int64_t i = 0; i < s.sq; ++i)
        for (int64_t j = 0; j < s.skv; ++j) {
          bool drop = gen() % 3 == 0 || (head == 0 && i == 1) ||
                      (2 * i < s.sq && 2 * j >= s.skv);
          in.mask[(head * s.sq + i) * s.skv + j] = drop ? 0.0f : 1.0f;
        }
  }
  return in;
}

/// Attention and its gradients in double.
struct Expected {
  std::vector<double> out, lse, dq, dk, dv;
};

Expected reference(const Inputs &in) {
  const Shape &s = in.shape;
  Expected e;
  e.out.assign(static_cast<size_t>(s.b * s.h * s.sq * s.dv), 0.0);
  e.lse.assign(static_cast<size_t>(s.b * s.h * s.sq), 0.0);
  e.dq.assign(static_cast<size_t>(s.b * s.h * s.sq * s.d), 0.0);
  e.dk.assign(static_cast<size_t>(s.b * s.h * s.skv * s.d), 0.0);
  e.dv.assign(static_cast<size_t>(s.b * s.h * s.skv * s.dv), 0.0);
  std::vector<double> p(static_cast<size_t>(s.skv));
  std::vector<char> allowed(static_cast<size_t>(s.skv));
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t hi = 0; hi < s.h; ++hi) {
      int64_t pair = bi * s.h + hi;
      const float *mask =
          in.mask.empty()
              ? nullptr
              : in.mask.data() + ((in.maskB == 1 ? 0 : bi) * in.maskH +
                                  (in.maskH == 1 ? 0 : hi)) *
                                     s.sq * s.skv;
      for (int64_t i = 0; i < s.sq; ++i) {
        int64_t row = pair * s.sq + i;
        const float *qi = in.q.data() + row * s.d;
        const float *doi = in.dOut.data() + row * s.dv;
        double maxScore = -INFINITY;
        for (int64_t j = 0; j < s.skv; ++j) {
          allowed[j] = !mask || mask[i * s.skv + j] != 0.0f;
          double dot = 0.0;
          for (int64_t c = 0; c < s.d; ++c)
            dot +=
                static_cast<double>(qi[c]) * in.k[(pair * s.skv + j) * s.d + c];
          p[j] = in.scale * dot;
          if (allowed[j])
            maxScore = std::max(maxScore, p[j]);
        }
        if (maxScore == -INFINITY) {
          e.lse[row] = -INFINITY;
          continue;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < s.skv; ++j)
          sum += allowed[j] ? std::exp(p[j] - maxScore) : 0.0;
        e.lse[row] = maxScore + std::log(sum);
        for (int64_t j = 0; j < s.skv; ++j)
          p[j] = allowed[j] ? std::exp(p[j] - e.lse[row]) : 0.0;
        // out = P·V; D = Σ_j p_j (dO·v_j); dS = P ∘ (dO·Vᵀ - D).
        double di = 0.0;
        std::vector<double> dp(static_cast<size_t>(s.skv), 0.0);
        for (int64_t j = 0; j < s.skv; ++j) {
          const float *vj = in.v.data() + (pair * s.skv + j) * s.dv;
          for (int64_t c = 0; c < s.dv; ++c) {
            e.out[row * s.dv + c] += p[j] * vj[c];
            dp[j] += static_cast<double>(doi[c]) * vj[c];
          }
          di += p[j] * dp[j];
        }
        for (int64_t j = 0; j < s.skv; ++j) {
          double ds = p[j] * (dp[j] - di) * in.scale;
          int64_t key = pair * s.skv + j;
          for (int64_t c = 0; c < s.d; ++c) {
            e.dq[row * s.d + c] += ds * in.k[key * s.d + c];
            e.dk[key * s.d + c] += ds * qi[c];
          }
          for (int64_t c = 0; c < s.dv; ++c)
            e.dv[key * s.dv + c] += p[j] * doi[c];
        }
      }
    }
  return e;
}

/// The kernels' results.
struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

SdFlashBlocks makeBlocks(int64_t q, int64_t kvCompute, int64_t kv,
                         bool fused = false) {
  // The backward passes use the forward's sizes.
  return SdFlashBlocks{q, kvCompute, kv,           q, kv, kvCompute,
                       q, kv,        fused ? 1 : 0};
}

/// Runs the forward with scratch for the current team; outputs start as
/// garbage so that unwritten elements show.
void runForward(const Inputs &in, const SdFlashBlocks &blocks, Result &r) {
  const Shape &s = in.shape;
  std::vector<float> scratch(static_cast<size_t>(flashAttentionScratchFloats(
      s.b, s.h, s.sq, s.skv, s.d, s.dv, blocks, omp_get_max_threads())));
  r.out.assign(static_cast<size_t>(s.b * s.h * s.sq * s.dv), -9.0f);
  r.lse.assign(static_cast<size_t>(s.b * s.h * s.sq), -9.0f);
  flashAttention(in.q.data(), in.k.data(), in.v.data(), in.maskData(), in.maskB,
                 in.maskH, r.out.data(), r.lse.data(), s.b, s.h, s.sq, s.skv,
                 s.d, s.dv, in.scale, blocks, scratch.data());
}

/// Runs the backward of `in` given the forward's `out` and `lse`, with
/// scratch for the current team, into the cotangents that are not null.
void callBackward(const Inputs &in, const SdFlashBlocks &blocks,
                  const std::vector<float> &out, const std::vector<float> &lse,
                  float *dq, float *dk, float *dv) {
  const Shape &s = in.shape;
  std::vector<float> scratch(
      static_cast<size_t>(flashAttentionBackwardScratchFloats(
          s.b, s.h, s.sq, s.skv, s.d, s.dv, blocks, omp_get_max_threads())));
  flashAttentionBackward(in.q.data(), in.k.data(), in.v.data(), in.maskData(),
                         in.maskB, in.maskH, out.data(), lse.data(),
                         in.dOut.data(), dq, dk, dv, s.b, s.h, s.sq, s.skv, s.d,
                         s.dv, in.scale, blocks, scratch.data());
}

/// Runs the backward of `in` given the forward's `out` and `lse`; the
/// cotangents start as garbage so that unwritten elements show.
void runBackward(const Inputs &in, const SdFlashBlocks &blocks,
                 const std::vector<float> &out, const std::vector<float> &lse,
                 Result &r) {
  const Shape &s = in.shape;
  r.dq.assign(static_cast<size_t>(s.b * s.h * s.sq * s.d), -9.0f);
  r.dk.assign(static_cast<size_t>(s.b * s.h * s.skv * s.d), -9.0f);
  r.dv.assign(static_cast<size_t>(s.b * s.h * s.skv * s.dv), -9.0f);
  callBackward(in, blocks, out, lse, r.dq.data(), r.dk.data(), r.dv.data());
}

Result run(const Inputs &in, const SdFlashBlocks &blocks) {
  Result r;
  runForward(in, blocks, r);
  runBackward(in, blocks, r.out, r.lse, r);
  return r;
}

/// Expects every element within kTol of `expected`, relative to its
/// magnitude with a floor of 5% of the tensor's largest (gradients are sums
/// of cancelling terms); -inf must match exactly.
void expectClose(const std::vector<float> &actual,
                 const std::vector<double> &expected, const char *what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double largest = 1e-30;
  for (double e : expected)
    if (std::isfinite(e))
      largest = std::max(largest, std::abs(e));
  double worst = 0.0;
  size_t worstAt = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isinf(expected[i])) {
      ASSERT_EQ(static_cast<double>(actual[i]), expected[i])
          << what << " element " << i;
      continue;
    }
    double err = std::abs(actual[i] - expected[i]) /
                 std::max(std::abs(expected[i]), 0.05 * largest);
    if (!(err <= worst)) {
      worst = err;
      worstAt = i;
    }
  }
  EXPECT_LE(worst, kTol) << what << " element " << worstAt << ": "
                         << actual[worstAt] << " vs " << expected[worstAt];
}

void expectMatchesReference(const Inputs &in, const Result &r) {
  Expected e = reference(in);
  expectClose(r.out, e.out, "out");
  expectClose(r.lse, e.lse, "lse");
  expectClose(r.dq, e.dq, "dq");
  expectClose(r.dk, e.dk, "dk");
  expectClose(r.dv, e.dv, "dv");
}

/// Calls `body` with `blocks` for each backward variant: a separate dQ
/// pass, then dQ fused into the dK/dV pass.
template <typename Body> void forEachBackward(SdFlashBlocks blocks, Body body) {
  for (int fused : {0, 1}) {
    SCOPED_TRACE(fused ? "fused dq" : "separate dq pass");
    blocks.fused_bwd = fused;
    body(blocks);
  }
}

/// Forward and both backward variants of `in` against the reference.
void check(const Inputs &in, const SdFlashBlocks &blocks) {
  forEachBackward(blocks, [&](const SdFlashBlocks &variant) {
    expectMatchesReference(in, run(in, variant));
  });
}

/// Rows [k0, k1) of each of the `slabs` [rows, width] slabs of `x`: the keys
/// of a K or V ([B·H, Skv, D]) or, with width 1, of a mask ([.., Sq, Skv]).
std::vector<float> keyRows(const std::vector<float> &x, int64_t slabs,
                           int64_t rows, int64_t width, int64_t k0,
                           int64_t k1) {
  std::vector<float> part;
  for (int64_t slab = 0; slab < slabs; ++slab)
    part.insert(part.end(), x.begin() + (slab * rows + k0) * width,
                x.begin() + (slab * rows + k1) * width);
  return part;
}

/// Each of the `slabs` [firstRows, width] slabs of `first` followed by the
/// matching [secondRows, width] slab of `second`: key halves joined back.
std::vector<float> joinKeyRows(const std::vector<float> &first,
                               int64_t firstRows,
                               const std::vector<float> &second,
                               int64_t secondRows, int64_t slabs,
                               int64_t width) {
  std::vector<float> all;
  for (int64_t slab = 0; slab < slabs; ++slab) {
    all.insert(all.end(), first.begin() + slab * firstRows * width,
               first.begin() + (slab + 1) * firstRows * width);
    all.insert(all.end(), second.begin() + slab * secondRows * width,
               second.begin() + (slab + 1) * secondRows * width);
  }
  return all;
}

bool bitwiseEqual(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Sets the team size for one scope.
class ScopedThreads {
public:
  explicit ScopedThreads(int threads) : saved(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedThreads() { omp_set_num_threads(saved); }

private:
  int saved;
};

TEST(FlashAttentionTest, DivisibleLengths) {
  check(makeInputs({2, 3, 32, 64, 16, 16}), makeBlocks(16, 16, 32));
}

TEST(FlashAttentionTest, NonDivisibleLengths) {
  // The last query block has 5 rows, the last K/V block 21 keys, and its
  // last compute sub-block 5.
  check(makeInputs({2, 2, 37, 53, 8, 8}), makeBlocks(16, 8, 32));
  // block_kv_compute does not divide block_kv either.
  check(makeInputs({1, 3, 29, 41, 5, 6}), makeBlocks(7, 6, 16));
}

TEST(FlashAttentionTest, SqDiffersFromSkvAndDFromDv) {
  check(makeInputs({2, 2, 19, 45, 12, 7}), makeBlocks(8, 16, 16));
  check(makeInputs({1, 2, 50, 9, 3, 10}), makeBlocks(16, 4, 8));
}

TEST(FlashAttentionTest, BlocksLargerThanLengths) {
  check(makeInputs({2, 2, 11, 13, 8, 4}), makeBlocks(1000, 999, 1000));
}

TEST(FlashAttentionTest, SingleRowAndKeyBlocks) {
  check(makeInputs({1, 2, 5, 7, 3, 4}), makeBlocks(1, 1, 1));
}

TEST(FlashAttentionTest, BroadcastMasksAndFullyMaskedRows) {
  Shape shape{2, 3, 37, 53, 8, 8};
  for (auto [maskB, maskH] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 3}, {1, 3}, {2, 1}, {1, 1}}) {
    SCOPED_TRACE(testing::Message() << "mask " << maskB << "x" << maskH);
    Inputs in = makeInputs(shape, maskB, maskH);
    SdFlashBlocks blocks = makeBlocks(16, 8, 32);
    check(in, blocks);
    // Query row 1 of head (0, 0) sees no key: zeros, lse -inf, no gradient.
    Result r = run(in, blocks);
    EXPECT_EQ(r.lse[1], kNegInf);
    for (int64_t j = 0; j < shape.dv; ++j)
      EXPECT_EQ(r.out[shape.dv + j], 0.0f);
    for (int64_t j = 0; j < shape.d; ++j)
      EXPECT_EQ(r.dq[shape.d + j], 0.0f);
  }
}

TEST(FlashAttentionTest, SingleHeadKeepsTwoThreadsBusy) {
  // One (batch, head) pair and one block of each kind: the kernels split the
  // blocks so that both threads get items.
  ScopedThreads threads(2);
  Inputs in = makeInputs({1, 1, 37, 53, 8, 8}, 1, 1);
  check(in, makeBlocks(64, 64, 64));
  check(in, makeBlocks(64, 16, 64));
}

TEST(FlashAttentionTest, BackwardOverKeySlicesAddsUp) {
  // Ring attention: the backward over each half of the keys, with the full
  // forward's out and lse, gives that half's dk, dv and a share of dq.
  Shape shape{2, 2, 23, 40, 8, 6};
  Inputs full = makeInputs(shape, 2, 1);
  forEachBackward(makeBlocks(8, 4, 16), [&](const SdFlashBlocks &blocks) {
    Result whole = run(full, blocks);
    int64_t split = 17;
    std::vector<float> dqSum(whole.dq.size(), 0.0f), dk, dv;
    for (auto [k0, k1] : {std::pair<int64_t, int64_t>{0, split},
                          std::pair<int64_t, int64_t>{split, shape.skv}}) {
      Inputs part = full;
      int64_t pairs = shape.b * shape.h;
      part.shape.skv = k1 - k0;
      part.k = keyRows(full.k, pairs, shape.skv, shape.d, k0, k1);
      part.v = keyRows(full.v, pairs, shape.skv, shape.dv, k0, k1);
      part.mask = keyRows(full.mask, full.maskB * full.maskH * shape.sq,
                          shape.skv, 1, k0, k1);
      Result r;
      runBackward(part, blocks, whole.out, whole.lse, r);
      for (size_t i = 0; i < dqSum.size(); ++i)
        dqSum[i] += r.dq[i];
      // Interleave the halves' rows back into [B, H, Skv, *].
      if (dk.empty()) {
        dk = r.dk;
        dv = r.dv;
        continue;
      }
      int64_t second = shape.skv - split;
      dk = joinKeyRows(dk, split, r.dk, second, pairs, shape.d);
      dv = joinKeyRows(dv, split, r.dv, second, pairs, shape.dv);
    }
    Expected e = reference(full);
    expectClose(dqSum, e.dq, "dq summed over key halves");
    expectClose(dk, e.dk, "dk of key halves");
    expectClose(dv, e.dv, "dv of key halves");
    // The whole-key backward's dq agrees with the halves' sum.
    expectClose(whole.dq, std::vector<double>(dqSum.begin(), dqSum.end()),
                "whole dq vs halves");
  });
}

TEST(FlashAttentionTest, NullCotangentsSkipTheirPass) {
  // The compiler asks for dQ and for dK/dV in two calls: each must equal
  // its part of the call that computes all three, and leave the other
  // buffers alone.
  Shape shape{2, 3, 21, 30, 8, 8};
  Inputs in = makeInputs(shape, 1, 1);
  forEachBackward(makeBlocks(8, 4, 16), [&](const SdFlashBlocks &blocks) {
    Result whole = run(in, blocks);
    std::vector<float> dq(whole.dq.size(), -9.0f);
    callBackward(in, blocks, whole.out, whole.lse, dq.data(), nullptr, nullptr);
    std::vector<float> dk(whole.dk.size(), -9.0f), dv(whole.dv.size(), -9.0f);
    callBackward(in, blocks, whole.out, whole.lse, nullptr, dk.data(),
                 dv.data());
    EXPECT_EQ(dk, whole.dk);
    EXPECT_EQ(dv, whole.dv);
    // The separate pass and the fused partials add in different orders.
    for (size_t i = 0; i < dq.size(); ++i)
      EXPECT_NEAR(dq[i], whole.dq[i], 1e-5 * (1.0 + std::abs(whole.dq[i])));
  });
}

TEST(FlashAttentionTest, NoKeysOrNoQueries) {
  // No keys: every row is fully masked.
  Inputs noKeys = makeInputs({1, 2, 5, 0, 4, 3});
  Result r = run(noKeys, makeBlocks(4, 4, 4));
  EXPECT_EQ(r.out, std::vector<float>(r.out.size(), 0.0f));
  EXPECT_EQ(r.lse, std::vector<float>(r.lse.size(), kNegInf));
  EXPECT_EQ(r.dq, std::vector<float>(r.dq.size(), 0.0f));
  r = run(noKeys, makeBlocks(4, 4, 4, /*fused=*/true));
  EXPECT_EQ(r.dq, std::vector<float>(r.dq.size(), 0.0f));
  // No queries: keys get no gradient.
  Inputs noQueries = makeInputs({1, 2, 0, 5, 4, 3});
  r = run(noQueries, makeBlocks(4, 4, 4));
  EXPECT_EQ(r.dk, std::vector<float>(r.dk.size(), 0.0f));
  EXPECT_EQ(r.dv, std::vector<float>(r.dv.size(), 0.0f));
}

TEST(FlashAttentionTest, EmptyHeadDims) {
  // An empty query/key head_dim makes every score 0 (rows average the
  // values); an empty value head_dim makes dP zeros (dQ and dK too). Empty
  // gradients still get (non-null) buffers: a null one skips its pass.
  for (Shape shape : {Shape{1, 2, 6, 7, 0, 3}, Shape{1, 2, 6, 7, 3, 0}})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(testing::Message() << "d " << shape.d << " dv " << shape.dv
                                      << " fused " << fused);
      Inputs in = makeInputs(shape);
      SdFlashBlocks blocks = makeBlocks(4, 4, 4, fused);
      Result r;
      runForward(in, blocks, r);
      r.dq.assign(in.q.size(), -9.0f);
      r.dk.assign(in.k.size(), -9.0f);
      r.dv.assign(in.v.size(), -9.0f);
      float none = -9.0f;
      auto buffer = [&](std::vector<float> &v) {
        return v.empty() ? &none : v.data();
      };
      callBackward(in, blocks, r.out, r.lse, buffer(r.dq), buffer(r.dk),
                   buffer(r.dv));
      expectMatchesReference(in, r);
    }
}

TEST(FlashAttentionTest, IsDeterministic) {
  Inputs in = makeInputs({2, 3, 70, 90, 16, 16}, 1, 3);
  forEachBackward(makeBlocks(32, 16, 64), [&](const SdFlashBlocks &blocks) {
    Result first = run(in, blocks), second = run(in, blocks);
    EXPECT_TRUE(bitwiseEqual(first.out, second.out));
    EXPECT_TRUE(bitwiseEqual(first.lse, second.lse));
    EXPECT_TRUE(bitwiseEqual(first.dq, second.dq));
    EXPECT_TRUE(bitwiseEqual(first.dk, second.dk));
    EXPECT_TRUE(bitwiseEqual(first.dv, second.dv));
  });
}

TEST(FlashAttentionTest, ApiEntriesMatchTheKernels) {
  // Through SdApi on a device of 2 threads: the same bits as the kernels on
  // a team of 2, with the scratch back in the pool afterwards.
  MeshRuntimeOptions options;
  options.mesh = MeshSpec({{"data", 1, 1}});
  options.threadsPerDevice = std::min(2, availableCpus());
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(std::move(options));
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  Inputs in = makeInputs({1, 3, 37, 53, 8, 8}, 1, 3);
  SdFlashBlocks blocks = makeBlocks(16, 8, 32, /*fused=*/true);
  const Shape &s = in.shape;
  Result viaApi;
  viaApi.out.resize(static_cast<size_t>(s.b * s.h * s.sq * s.dv));
  viaApi.lse.resize(static_cast<size_t>(s.b * s.h * s.sq));
  viaApi.dq.resize(in.q.size());
  viaApi.dk.resize(in.k.size());
  viaApi.dv.resize(in.v.size());
  absl::Status status = (*runtime)->runOnDevices([&](Device &device) {
    const SdApi *api = MeshRuntime::api();
    auto *dev = reinterpret_cast<SdDevice *>(&device);
    if (api->flash_attention(dev, in.q.data(), in.k.data(), in.v.data(),
                             in.maskData(), in.maskB, in.maskH,
                             viaApi.out.data(), viaApi.lse.data(), s.b, s.h,
                             s.sq, s.skv, s.d, s.dv, in.scale, &blocks) != 0 ||
        api->flash_attention_backward(
            dev, in.q.data(), in.k.data(), in.v.data(), in.maskData(), in.maskB,
            in.maskH, viaApi.out.data(), viaApi.lse.data(), in.dOut.data(),
            viaApi.dq.data(), viaApi.dk.data(), viaApi.dv.data(), s.b, s.h,
            s.sq, s.skv, s.d, s.dv, in.scale, &blocks) != 0)
      return device.error();
    EXPECT_EQ(device.pool(SD_DEVICE_MEMORY).liveBytes(), 0);
    EXPECT_GT(device.pool(SD_DEVICE_MEMORY).peakBytes(), 0);
    // Without block sizes the entry fails instead of crashing.
    EXPECT_NE(api->flash_attention(dev, in.q.data(), in.k.data(), in.v.data(),
                                   nullptr, 1, 1, viaApi.out.data(),
                                   viaApi.lse.data(), s.b, s.h, s.sq, s.skv,
                                   s.d, s.dv, in.scale, nullptr),
              0);
    EXPECT_EQ(device.error().code(), absl::StatusCode::kInvalidArgument);
    device.clearError();
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  ScopedThreads threads(2);
  Result direct = run(in, blocks);
  EXPECT_TRUE(bitwiseEqual(viaApi.out, direct.out));
  EXPECT_TRUE(bitwiseEqual(viaApi.lse, direct.lse));
  EXPECT_TRUE(bitwiseEqual(viaApi.dq, direct.dq));
  EXPECT_TRUE(bitwiseEqual(viaApi.dk, direct.dk));
  EXPECT_TRUE(bitwiseEqual(viaApi.dv, direct.dv));
  expectMatchesReference(in, direct);
}

} // namespace
} // namespace sd::rt::kernels
