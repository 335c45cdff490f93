//===- FlashAttentionBF16Test.cpp - bf16 attention vs the reference -------===//
//
// The bf16 flash kernels, and the untiled (dot_product) kernel at the end,
// (bf16 tile products, P and dS rounded to bf16 where a product reads them, f32
// statistics and accumulators) against sd/Reference's flash kernels on the same
// bf16 operands, which round at the same points in double. Both results are
// rounded to bf16, so they may differ where an f32 sum and a double sum round
// to neighbouring bf16 values, or where exp in f32 and in double put a
// probability on either side of a bf16 rounding boundary: the bound is two bf16
// steps (2^-7) of the element, with a floor of 5% of the tensor's largest
// (gradients are sums of cancelling terms). lse, which involves no bf16
// rounding, agrees to f32 round-off. (Measured on these cases: every bf16
// result equal to the reference's; against a reference that does not round P,
// 1386 of 4096 outputs differ, against this one 1.)
//
//===----------------------------------------------------------------------===//

#include "sd/Reference/Kernels.h"
#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/Kernels.h"

#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace sd::rt::kernels {
namespace {

constexpr double kBF16Tol = 1.0 / 128.0;

struct Shape {
  int64_t b, h, sq, skv, d, dv;
};

/// bf16 values and their doubles.
struct Operand {
  std::vector<sd_bf16> bits;
  std::vector<double> values;
};

Operand randomBF16(int64_t n, uint32_t seed, float lo, float hi) {
  Operand op;
  for (float x : testutil::randomFloats(n, seed, lo, hi)) {
    BFloat16 rounded = toBFloat16(x);
    op.bits.push_back(sd_bf16{rounded.bits});
    op.values.push_back(toFloat(rounded));
  }
  return op;
}

std::vector<double> widened(const std::vector<sd_bf16> &bits) {
  std::vector<double> values;
  for (sd_bf16 x : bits)
    values.push_back(toFloat(BFloat16{x.bits}));
  return values;
}

struct Problem {
  Shape s;
  Operand q, k, v, dOut;
  std::vector<float> mask;
  double scale;
};

/// Random operands; with `masked`, a [1, 1, Sq, Skv] mask dropping a third
/// of the keys, every key of query row 1, and the second half of the keys
/// for the first half of the queries.
Problem makeProblem(Shape s, bool masked, uint32_t seed = 7) {
  Problem p{s,
            randomBF16(s.b * s.h * s.sq * s.d, seed, -2.0f, 2.0f),
            randomBF16(s.b * s.h * s.skv * s.d, seed + 1, -2.0f, 2.0f),
            randomBF16(s.b * s.h * s.skv * s.dv, seed + 2, -1.0f, 1.0f),
            randomBF16(s.b * s.h * s.sq * s.dv, seed + 3, -1.0f, 1.0f),
            {},
            1.0 / std::sqrt(static_cast<double>(s.d))};
  if (masked) {
    std::mt19937 gen(seed + 4);
    for (int64_t i = 0; i < s.sq; ++i)
      for (int64_t j = 0; j < s.skv; ++j)
        p.mask.push_back(gen() % 3 == 0 || i == 1 ||
                                 (2 * i < s.sq && 2 * j >= s.skv)
                             ? 0.0f
                             : 1.0f);
  }
  return p;
}

SdFlashBlocks makeBlocks(int64_t q, int64_t kvCompute, int64_t kv, bool fused) {
  return SdFlashBlocks{q, kvCompute, kv,           q, kv, kvCompute,
                       q, kv,        fused ? 1 : 0};
}

ref::FlashBlockSizes referenceBlocks(const SdFlashBlocks &b) {
  ref::FlashBlockSizes sizes;
  sizes.blockQ = b.block_q;
  sizes.blockKvCompute = b.block_kv_compute;
  sizes.blockKv = b.block_kv;
  sizes.blockQDkv = b.block_q_dkv;
  sizes.blockKvDkv = b.block_kv_dkv;
  sizes.blockKvDkvCompute = b.block_kv_dkv_compute;
  sizes.blockQDq = b.block_q_dq;
  sizes.blockKvDq = b.block_kv_dq;
  sizes.fusedBackward = b.fused_bwd != 0;
  return sizes;
}

/// The runtime's results, widened.
struct Result {
  std::vector<double> out, lse, dq, dk, dv;
};

Result runKernels(const Problem &p, const SdFlashBlocks &blocks) {
  const Shape &s = p.s;
  const float *mask = p.mask.empty() ? nullptr : p.mask.data();
  int threads = omp_get_max_threads();
  std::vector<float> scratch(static_cast<size_t>(std::max(
      flashAttentionScratchFloats(s.b, s.h, s.sq, s.skv, s.d, s.dv, blocks,
                                  threads, SD_BF16),
      flashAttentionBackwardScratchFloats(s.b, s.h, s.sq, s.skv, s.d, s.dv,
                                          blocks, threads, SD_BF16))));
  // Outputs start as garbage (a bf16 of -9) so that unwritten ones show.
  sd_bf16 garbage{toBFloat16(-9.0f).bits};
  std::vector<sd_bf16> out(p.dOut.bits.size(), garbage);
  std::vector<float> lse(static_cast<size_t>(s.b * s.h * s.sq), -9.0f);
  flashAttention(p.q.bits.data(), p.k.bits.data(), p.v.bits.data(), mask, 1, 1,
                 out.data(), lse.data(), s.b, s.h, s.sq, s.skv, s.d, s.dv,
                 p.scale, blocks, scratch.data());
  std::vector<sd_bf16> dq(p.q.bits.size(), garbage),
      dk(p.k.bits.size(), garbage), dv(p.v.bits.size(), garbage);
  flashAttentionBackward(p.q.bits.data(), p.k.bits.data(), p.v.bits.data(),
                         mask, 1, 1, out.data(), lse.data(), p.dOut.bits.data(),
                         dq.data(), dk.data(), dv.data(), s.b, s.h, s.sq, s.skv,
                         s.d, s.dv, p.scale, blocks, scratch.data());
  return {widened(out), std::vector<double>(lse.begin(), lse.end()),
          widened(dq), widened(dk), widened(dv)};
}

/// The reference on the same bf16 operands (its backward reads the
/// runtime's forward results, as the program's backward does); results
/// rounded to bf16 as the program stores them, lse kept in f32.
Result runReference(const Problem &p, const SdFlashBlocks &blocks,
                    const Result &forward) {
  const Shape &s = p.s;
  auto tensor = [](std::vector<int64_t> shape, std::vector<double> values,
                   ref::DType type) {
    return ref::Tensor(std::move(shape), type, std::move(values));
  };
  ref::DType bf16 = ref::DType::BF16;
  ref::Tensor q = tensor({s.b, s.h, s.sq, s.d}, p.q.values, bf16);
  ref::Tensor k = tensor({s.b, s.h, s.skv, s.d}, p.k.values, bf16);
  ref::Tensor v = tensor({s.b, s.h, s.skv, s.dv}, p.v.values, bf16);
  ref::Tensor dOut = tensor({s.b, s.h, s.sq, s.dv}, p.dOut.values, bf16);
  ref::Tensor mask;
  if (!p.mask.empty())
    mask = tensor({1, 1, s.sq, s.skv},
                  std::vector<double>(p.mask.begin(), p.mask.end()),
                  ref::DType::F32);
  const ref::Tensor *maskPtr = p.mask.empty() ? nullptr : &mask;
  ref::FlashBlockSizes sizes = referenceBlocks(blocks);
  ref::FlashForward fwd = ref::flashAttention(q, k, v, maskPtr, p.scale, sizes);
  ref::FlashGradients grads = ref::flashAttentionBackward(
      q, k, v, maskPtr, tensor({s.b, s.h, s.sq, s.dv}, forward.out, bf16),
      tensor({s.b, s.h, s.sq}, forward.lse, ref::DType::F32), dOut, p.scale,
      sizes);
  auto rounded = [](const ref::Tensor &t, ref::DType type) {
    std::vector<double> values = t.values();
    for (double &x : values)
      x = ref::roundTo(type, x);
    return values;
  };
  return {rounded(fwd.out, bf16), rounded(fwd.lse, ref::DType::F32),
          rounded(grads.dq, bf16), rounded(grads.dk, bf16),
          rounded(grads.dv, bf16)};
}

/// The largest error of `actual` against `expected`, relative to each
/// element with a floor of 5% of the largest; -inf must match exactly.
double worstError(const std::vector<double> &actual,
                  const std::vector<double> &expected, const char *what) {
  EXPECT_EQ(actual.size(), expected.size()) << what;
  double largest = 1e-30;
  for (double e : expected)
    if (std::isfinite(e))
      largest = std::max(largest, std::abs(e));
  double worst = 0.0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << what << " element " << i;
      continue;
    }
    double err = std::abs(actual[i] - expected[i]) /
                 std::max(std::abs(expected[i]), 0.05 * largest);
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  return worst;
}

void check(const Problem &p, const SdFlashBlocks &blocks) {
  Result actual = runKernels(p, blocks);
  Result expected = runReference(p, blocks, actual);
  EXPECT_LE(worstError(actual.out, expected.out, "out"), kBF16Tol);
  EXPECT_LE(worstError(actual.lse, expected.lse, "lse"), 1e-5);
  EXPECT_LE(worstError(actual.dq, expected.dq, "dq"), kBF16Tol);
  EXPECT_LE(worstError(actual.dk, expected.dk, "dk"), kBF16Tol);
  EXPECT_LE(worstError(actual.dv, expected.dv, "dv"), kBF16Tol);
}

/// Runs `body` on teams of 1 and 2 threads, each with the dQ pass separate
/// and fused.
template <typename Body> void forEachVariant(Body body) {
  int saved = omp_get_max_threads();
  for (int threads : {1, 2})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << threads << " threads, " << (fused ? "fused" : "separate")
                   << " dq");
      omp_set_num_threads(threads);
      body(fused);
    }
  omp_set_num_threads(saved);
}

TEST(FlashAttentionBF16Test, OneTileMatchesReference) {
  // DiT's case: every length within one block.
  Problem p = makeProblem({2, 3, 32, 32, 16, 16}, /*masked=*/false);
  forEachVariant([&](bool fused) { check(p, makeBlocks(64, 64, 64, fused)); });
}

TEST(FlashAttentionBF16Test, PartialBlocksAndSubBlocksMatchReference) {
  // Blocks that do not divide the lengths, K/V blocks split into compute
  // sub-blocks (the online softmax rescales), and Dv != D.
  Problem p = makeProblem({1, 2, 21, 30, 8, 12}, /*masked=*/false);
  forEachVariant([&](bool fused) { check(p, makeBlocks(8, 4, 16, fused)); });
}

TEST(FlashAttentionBF16Test, MaskedRowsAndTilesMatchReference) {
  // A fully masked row (zeros, lse -inf) and fully masked tiles (skipped).
  Problem p = makeProblem({2, 2, 17, 24, 8, 8}, /*masked=*/true);
  forEachVariant([&](bool fused) { check(p, makeBlocks(8, 4, 8, fused)); });
}

TEST(FlashAttentionBF16Test, ModelsTheRoundingOfPAndDS) {
  // The same problem against a reference that does not round P and dS (f32
  // operands of equal values): the bf16 kernel is measurably farther from it
  // than from the reference that rounds where the kernel does, so the model
  // is what the tight bound above rests on.
  Problem p = makeProblem({1, 2, 64, 64, 32, 32}, /*masked=*/false, 11);
  SdFlashBlocks blocks = makeBlocks(64, 64, 64, /*fused=*/true);
  Result actual = runKernels(p, blocks);
  Result modelled = runReference(p, blocks, actual);
  ref::Tensor q({1, 2, 64, 32}, ref::DType::F32, p.q.values);
  ref::Tensor k({1, 2, 64, 32}, ref::DType::F32, p.k.values);
  ref::Tensor v({1, 2, 64, 32}, ref::DType::F32, p.v.values);
  ref::FlashForward unrounded =
      ref::flashAttention(q, k, v, nullptr, p.scale, referenceBlocks(blocks));
  std::vector<double> plain = unrounded.out.values();
  for (double &x : plain)
    x = ref::roundTo(ref::DType::BF16, x);
  auto mismatches = [&](const std::vector<double> &expected) {
    int64_t count = 0;
    for (size_t i = 0; i < expected.size(); ++i)
      count += actual.out[i] != expected[i];
    return count;
  };
  EXPECT_LT(mismatches(modelled.out), mismatches(plain));
}

//===----------------------------------------------------------------------===//
// The untiled kernel (dot_product attention) on bf16 operands
//===----------------------------------------------------------------------===//

/// The untiled bf16 kernel's output, widened, on teams of `threads`.
std::vector<double> runUntiled(const Problem &p, int threads) {
  const Shape &s = p.s;
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<float> scratch(static_cast<size_t>(
      attentionScratchFloats(s.sq, s.skv, s.dv, threads, SD_BF16)));
  std::vector<sd_bf16> out(p.dOut.bits.size(), sd_bf16{toBFloat16(-9.0f).bits});
  attention(p.q.bits.data(), p.k.bits.data(), p.v.bits.data(),
            p.mask.empty() ? nullptr : p.mask.data(), 1, 1, out.data(), s.b,
            s.h, s.sq, s.skv, s.d, s.dv, p.scale, scratch.data());
  omp_set_num_threads(saved);
  return widened(out);
}

/// sd/Reference's attention on `p`'s operands as `type` (bf16: P rounded
/// before the product with V), its output rounded to bf16.
std::vector<double> referenceUntiled(const Problem &p, ref::DType type) {
  const Shape &s = p.s;
  ref::Tensor mask;
  if (!p.mask.empty())
    mask = ref::Tensor({1, 1, s.sq, s.skv}, ref::DType::F32,
                       std::vector<double>(p.mask.begin(), p.mask.end()));
  ref::Tensor out =
      ref::attention(ref::Tensor({s.b, s.h, s.sq, s.d}, type, p.q.values),
                     ref::Tensor({s.b, s.h, s.skv, s.d}, type, p.k.values),
                     ref::Tensor({s.b, s.h, s.skv, s.dv}, type, p.v.values),
                     p.mask.empty() ? nullptr : &mask, p.scale);
  std::vector<double> values = out.values();
  for (double &x : values)
    x = ref::roundTo(ref::DType::BF16, x);
  return values;
}

TEST(AttentionBF16Test, MatchesReference) {
  // Dv != D, a mask with a fully masked row (zeros), one and two threads
  // (two threads split one pair's query rows).
  for (bool masked : {false, true})
    for (Shape shape :
         {Shape{2, 3, 32, 32, 16, 16}, Shape{1, 1, 17, 24, 8, 12}})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(testing::Message()
                     << "masked " << masked << ", Sq " << shape.sq << ", "
                     << threads << " threads");
        Problem p = makeProblem(shape, masked);
        std::vector<double> expected = referenceUntiled(p, ref::DType::BF16);
        EXPECT_LE(worstError(runUntiled(p, threads), expected, "out"),
                  kBF16Tol);
      }
}

TEST(AttentionBF16Test, ModelsTheRoundingOfP) {
  // As for the flash kernels: the kernel is closer to the reference that
  // rounds P where it does than to one that does not.
  Problem p = makeProblem({1, 2, 64, 64, 32, 32}, /*masked=*/false, 11);
  std::vector<double> actual = runUntiled(p, 1);
  auto mismatches = [&](const std::vector<double> &expected) {
    int64_t count = 0;
    for (size_t i = 0; i < expected.size(); ++i)
      count += actual[i] != expected[i];
    return count;
  };
  EXPECT_LT(mismatches(referenceUntiled(p, ref::DType::BF16)),
            mismatches(referenceUntiled(p, ref::DType::F32)));
}

} // namespace
} // namespace sd::rt::kernels
