//===- KernelsTest.cpp - Runtime kernels against the reference ------------===//
//
// Every f32 kernel is compared with sd::ref's double-precision kernel on odd
// shapes, and checked to be bitwise deterministic run to run; so is the bf16
// GEMM (within the round-off bound of f32 accumulation), and the 2-byte
// transpose moves elements exactly as the f32 one does.
//
//===----------------------------------------------------------------------===//

#include "sd/Reference/Kernels.h"
#include "sd/Reference/Random.h"
#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/ConvScratch.h"
#include "sd/Runtime/Kernels.h"

#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace sd::rt::kernels {
namespace {

using ref::DType;
using ref::Tensor;

using testutil::randomFloats;

Tensor toTensor(const std::vector<float> &v, std::vector<int64_t> shape) {
  return Tensor(std::move(shape), DType::F32,
                std::vector<double>(v.begin(), v.end()));
}

/// The f32 result as a reference tensor of `shape`.
Tensor fromFloats(const float *v, std::vector<int64_t> shape) {
  int64_t n = ref::shapeProduct(shape);
  return Tensor(std::move(shape), DType::F32, std::vector<double>(v, v + n));
}

bool bitwiseEqual(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Relative tolerance of every comparison with the double reference. Sums of
/// products (GEMM, convolution) compare with an absolute floor of 1, their
/// round-off being relative to the terms, not to a cancelled result.
constexpr double kTol = 1e-5;
/// Normalizations keep their statistics in double: a few f32 ulps (outputs
/// near zero, where the bias cancels, compare with an absolute floor of 0.1).
constexpr double kNormTol = 2e-6;

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

struct GemmCase {
  int64_t batch, m, n, k;
  bool transA, transB;
  float beta;
};

/// Runs `gemm` on padded, strided operands and compares every batch with
/// ref::dotGeneral of the logical matrices plus beta * C.
void checkGemm(const GemmCase &c) {
  SCOPED_TRACE(testing::Message()
               << "batch " << c.batch << " " << c.m << "x" << c.n << "x" << c.k
               << " transA " << c.transA << " transB " << c.transB << " beta "
               << c.beta);
  // Stored shapes: op(A) is m x k, stored k x m when transposed.
  int64_t aRows = c.transA ? c.k : c.m, aCols = c.transA ? c.m : c.k;
  int64_t bRows = c.transB ? c.n : c.k, bCols = c.transB ? c.k : c.n;
  int64_t lda = aCols + 3, ldb = bCols + 1, ldc = c.n + 2;
  int64_t strideA = aRows * lda + 5, strideB = bRows * ldb + 2;
  int64_t strideC = c.m * ldc + 7;
  std::vector<float> a = randomFloats(c.batch * strideA, 1);
  std::vector<float> b = randomFloats(c.batch * strideB, 2);
  std::vector<float> c0 = randomFloats(c.batch * strideC, 3);
  std::vector<float> out = c0;
  gemm(c.batch, c.transA, c.transB, c.m, c.n, c.k, a.data(), lda, strideA,
       b.data(), ldb, strideB, c.beta, out.data(), ldc, strideC);

  std::vector<double> lhs, rhs;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t p = 0; p < c.k; ++p)
        lhs.push_back(a[bi * strideA + (c.transA ? p * lda + i : i * lda + p)]);
    for (int64_t p = 0; p < c.k; ++p)
      for (int64_t j = 0; j < c.n; ++j)
        rhs.push_back(b[bi * strideB + (c.transB ? j * ldb + p : p * ldb + j)]);
  }
  Tensor product = ref::dotGeneral(Tensor({c.batch, c.m, c.k}, DType::F32, lhs),
                                   Tensor({c.batch, c.k, c.n}, DType::F32, rhs),
                                   {0}, {0}, {2}, {1});
  std::vector<double> expected, actual;
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        int64_t at = bi * strideC + i * ldc + j;
        expected.push_back(product[(bi * c.m + i) * c.n + j] +
                           static_cast<double>(c.beta) * c0[at]);
        actual.push_back(out[at]);
      }
  Tensor shape({c.batch, c.m, c.n}, DType::F32);
  EXPECT_LT(ref::maxRelativeDifference(
                Tensor(shape.shape(), DType::F32, actual),
                Tensor(shape.shape(), DType::F32, expected), 1.0),
            kTol);
  // Padding between rows and batches is untouched.
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < ldc; ++j)
        EXPECT_EQ(out[bi * strideC + i * ldc + j],
                  c0[bi * strideC + i * ldc + j]);
}

/// Every vector path of the row exponentials gives the same bits, values
/// and sum, for lengths with and without a tail, with -inf entries (masked
/// keys) and a NaN; the values are exp's to a few ulp.
TEST(KernelsTest, RowExponentialsAgreeAcrossVectorPaths) {
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 256, 515}) {
    std::vector<float> row = randomFloats(n, 0x5eed + n);
    for (float &v : row)
      v *= 20.0f; // scores in [-20, 20)
    if (n > 3) {
      row[1] = -std::numeric_limits<float>::infinity();
      row[n - 2] = -std::numeric_limits<float>::infinity();
    }
    float shift = *std::max_element(row.begin(), row.end());
    std::vector<float> best = row;
    double bestSum = expShiftedRow(best.data(), n, shift);
    double want = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      // The difference is taken in float, as the kernel does.
      double e = std::exp(static_cast<double>(row[i] - shift));
      want += e;
      EXPECT_NEAR(best[i], e, 4e-7 * e + 1e-38) << "n " << n << " i " << i;
    }
    EXPECT_NEAR(bestSum, want, 1e-6 * want) << "n " << n;
    for (VectorPath path : {VectorPath::Avx2, VectorPath::Avx512}) {
      if (!hasVectorPath(path))
        continue;
      std::vector<float> other = row;
      double sum = expShiftedRow(other.data(), n, shift, nullptr, path);
      EXPECT_EQ(std::memcmp(other.data(), best.data(), n * sizeof(float)), 0)
          << "n " << n;
      EXPECT_EQ(std::memcmp(&sum, &bestSum, sizeof(sum)), 0) << "n " << n;
    }
  }
  // The whole range, unshifted: exp to a few ulp on Cephes' range
  // [-87.3365, 88.3763] (normal floats), 0 below it and +inf above it, the
  // same bits in every path.
  std::vector<float> wide;
  for (float x = -100.0f; x <= 100.0f; x += 0.37f)
    wide.push_back(x);
  for (float x : {-87.3365f, -87.33f, -87.34f, 88.37f, 88.3762f, 88.38f})
    wide.push_back(x);
  std::vector<float> wideBest = wide;
  expShiftedRow(wideBest.data(), static_cast<int64_t>(wide.size()), 0.0f);
  for (size_t i = 0; i < wide.size(); ++i) {
    double e = std::exp(static_cast<double>(wide[i]));
    if (wide[i] < -87.3365447504f)
      EXPECT_EQ(wideBest[i], 0.0f) << wide[i];
    else if (wide[i] > 88.3762626647949f)
      EXPECT_TRUE(std::isinf(wideBest[i])) << wide[i];
    else
      EXPECT_NEAR(wideBest[i], e, 4e-7 * e) << wide[i];
  }
  for (VectorPath path : {VectorPath::Avx2, VectorPath::Avx512}) {
    if (!hasVectorPath(path))
      continue;
    std::vector<float> other = wide;
    expShiftedRow(other.data(), static_cast<int64_t>(wide.size()), 0.0f,
                  nullptr, path);
    EXPECT_EQ(
        std::memcmp(other.data(), wideBest.data(), wide.size() * sizeof(float)),
        0);
  }
  std::vector<float> nan = {0.0f, std::nanf(""), -1.0f};
  expShiftedRow(nan.data(), 3, 0.0f);
  EXPECT_TRUE(std::isnan(nan[1]));
  EXPECT_EQ(nan[0], 1.0f);
}

/// The bf16 attention kernels' fused rows: the exponentials (and the score
/// gradients) rounded in the pass that computes them are toBFloat16 of the
/// f32 results, which are the unfused ones, on every vector path, for
/// lengths with and without a tail.
TEST(KernelsTest, RoundedRowsAreTheF32RowsRounded) {
  for (int64_t n : {1, 7, 15, 16, 17, 33, 256, 515}) {
    std::vector<float> row = randomFloats(n, 0xb16 + n);
    for (float &v : row)
      v *= 20.0f;
    if (n > 3)
      row[1] = -std::numeric_limits<float>::infinity();
    float shift = *std::max_element(row.begin(), row.end());
    std::vector<float> plain = row;
    double plainSum = expShiftedRow(plain.data(), n, shift);
    std::vector<float> dP = randomFloats(n, 0xd5 + n);
    std::vector<float> plainDs(n);
    for (int64_t i = 0; i < n; ++i)
      plainDs[i] = plain[i] * (dP[i] - 0.25f);
    for (VectorPath path :
         {VectorPath::Best, VectorPath::Avx2, VectorPath::Avx512}) {
      if (path != VectorPath::Best && !hasVectorPath(path))
        continue;
      std::vector<float> fused = row;
      std::vector<sd_bf16> low(n);
      double sum = expShiftedRow(fused.data(), n, shift, low.data(), path);
      EXPECT_EQ(std::memcmp(&sum, &plainSum, sizeof(sum)), 0) << "n " << n;
      std::vector<float> ds = dP;
      std::vector<sd_bf16> dsLow(n);
      scoreGradsRow(fused.data(), ds.data(), 0.25f, n, dsLow.data(), path);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(fused[i], plain[i]) << "n " << n << " i " << i;
        EXPECT_EQ(low[i].bits, toBFloat16(plain[i]).bits)
            << "n " << n << " i " << i;
        EXPECT_EQ(ds[i], plainDs[i]) << "n " << n << " i " << i;
        EXPECT_EQ(dsLow[i].bits, toBFloat16(plainDs[i]).bits)
            << "n " << n << " i " << i;
      }
    }
  }
}

TEST(KernelsTest, GemmAllTransposesStridesAndBeta) {
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (float beta : {0.0f, 1.0f, 0.5f})
        checkGemm({3, 5, 7, 9, transA, transB, beta});
}

TEST(KernelsTest, GemmBatchedSmallAndSequentialLarge) {
  // Small GEMMs run one per thread; large ones use the library's threads.
  checkGemm({8, 33, 17, 64, false, true, 0.0f});
  checkGemm({2, 301, 203, 97, true, false, 0.25f});
  checkGemm({1, 1, 1, 1, false, false, 0.0f});
}

TEST(KernelsTest, GemmWithEmptyContractionScalesC) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  gemm(1, false, false, 2, 3, 0, nullptr, 1, 0, nullptr, 3, 0, 0.5f, c.data(),
       3, 0);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
}

TEST(KernelsTest, GemmIsDeterministic) {
  // Every form (oneDNN for all but Aᵀ·B, OpenBLAS for that one), batched
  // small GEMMs and one large one on the whole team: the same bits twice.
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (auto [batch, m, n, k] : {std::array<int64_t, 4>{8, 129, 77, 300},
                                    std::array<int64_t, 4>{1, 300, 500, 700}}) {
        SCOPED_TRACE(testing::Message() << "transA " << transA << " transB "
                                        << transB << " batch " << batch);
        std::vector<float> a = randomFloats(batch * m * k, 4),
                           b = randomFloats(batch * k * n, 5);
        std::vector<float> c1(batch * m * n), c2(batch * m * n);
        for (std::vector<float> *c : {&c1, &c2})
          gemm(batch, transA, transB, m, n, k, a.data(), transA ? m : k, m * k,
               b.data(), transB ? k : n, k * n, 0.0f, c->data(), n, m * n);
        EXPECT_TRUE(bitwiseEqual(c1, c2));
      }
}

//===----------------------------------------------------------------------===//
// bf16 GEMM
//===----------------------------------------------------------------------===//

/// `n` random bf16 numbers in [-1, 1).
std::vector<sd_bf16> randomBF16(int64_t n, uint32_t seed) {
  std::vector<float> values = randomFloats(n, seed);
  std::vector<sd_bf16> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = {toBFloat16(values[i]).bits};
  return bits;
}

double bf16Value(sd_bf16 x) { return toFloat(BFloat16{x.bits}); }

/// A quiet NaN: what gemmBF16 must never read (operand padding).
constexpr sd_bf16 kBF16NaN = {0x7fc0};

struct GemmBF16Case {
  int64_t batch, m, n, k;
  bool transA, transB, cIsBF16;
  /// Extra elements at the end of each stored row (lda, ldb, ldc), and
  /// between the batches of A and B.
  int64_t pad;
  /// strideC == m * ldc: one oneDNN call for the whole batch; otherwise a
  /// gap after each batch of C, and one call per GEMM.
  bool packedC;
};

/// Runs gemmBF16 on padded, strided operands (NaN in every padding element
/// of A and B) and compares every element of C with the double product of
/// the bf16 inputs, ref::dotGeneral.
///
/// The bound: a product of two bf16 numbers (8 significant bits each) is
/// exact in f32, so the only f32 round-off is in the k-term sum, whose
/// error in any order is at most (k - 1) u S, with u = 2^-24 and
/// S = sum_p |a_ip||b_pj| (Higham, 3.1). With twice that as margin for
/// oneDNN's kernels (VDPBF16PS adds its two products in turn, rounding
/// after each; blocked partial sums), gamma = k * 2^-23:
///   |c - e| <= gamma * S                                       (f32 C)
/// and rounding that sum to bf16 once adds half a bf16 ulp, at most 2^-8
/// of its magnitude:
///   |c - e| <= gamma * S + 2^-8 * (|e| + gamma * S)            (bf16 C).
void checkGemmBF16(const GemmBF16Case &c) {
  SCOPED_TRACE(testing::Message()
               << "batch " << c.batch << " " << c.m << "x" << c.n << "x" << c.k
               << " transA " << c.transA << " transB " << c.transB << " C "
               << (c.cIsBF16 ? "bf16" : "f32") << " pad " << c.pad
               << " packedC " << c.packedC);
  int64_t aRows = c.transA ? c.k : c.m, aCols = c.transA ? c.m : c.k;
  int64_t bRows = c.transB ? c.n : c.k, bCols = c.transB ? c.k : c.n;
  int64_t lda = aCols + c.pad, ldb = bCols + 2 * c.pad, ldc = c.n + c.pad;
  int64_t strideA = aRows * lda + c.pad, strideB = bRows * ldb + 3 * c.pad;
  int64_t strideC = c.m * ldc + (c.packedC ? 0 : 5);
  std::vector<sd_bf16> a(c.batch * strideA, kBF16NaN),
      b(c.batch * strideB, kBF16NaN);
  std::vector<sd_bf16> valuesA = randomBF16(c.batch * c.m * c.k, 11),
                       valuesB = randomBF16(c.batch * c.k * c.n, 12);
  // The logical operands [batch, m, k] and [batch, k, n], and their
  // absolute values for the bound.
  std::vector<double> lhs, rhs, absLhs, absRhs;
  for (int64_t bi = 0, next = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t p = 0; p < c.k; ++p, ++next) {
        a[bi * strideA + (c.transA ? p * lda + i : i * lda + p)] =
            valuesA[next];
        lhs.push_back(bf16Value(valuesA[next]));
        absLhs.push_back(std::fabs(lhs.back()));
      }
  for (int64_t bi = 0, next = 0; bi < c.batch; ++bi)
    for (int64_t p = 0; p < c.k; ++p)
      for (int64_t j = 0; j < c.n; ++j, ++next) {
        b[bi * strideB + (c.transB ? j * ldb + p : p * ldb + j)] =
            valuesB[next];
        rhs.push_back(bf16Value(valuesB[next]));
        absRhs.push_back(std::fabs(rhs.back()));
      }
  // C starts as random bits (NaNs among them) that gemmBF16 overwrites, and
  // keeps in its padding.
  std::vector<uint16_t> c0Bits(c.batch * strideC * 2);
  std::mt19937 gen(13);
  for (uint16_t &x : c0Bits)
    x = static_cast<uint16_t>(gen());
  std::vector<uint16_t> out = c0Bits;
  gemmBF16(c.batch, c.transA, c.transB, c.m, c.n, c.k, a.data(), lda, strideA,
           b.data(), ldb, strideB, out.data(), c.cIsBF16, ldc, strideC);

  auto dot = [&](const std::vector<double> &x, const std::vector<double> &y) {
    return ref::dotGeneral(Tensor({c.batch, c.m, c.k}, DType::BF16, x),
                           Tensor({c.batch, c.k, c.n}, DType::BF16, y), {0},
                           {0}, {2}, {1});
  };
  Tensor product = dot(lhs, rhs), absProduct = dot(absLhs, absRhs);
  const double gamma = static_cast<double>(c.k) * std::ldexp(1.0, -23);
  const double halfUlp = c.cIsBF16 ? std::ldexp(1.0, -8) : 0.0;
  // The largest |c - e| / bound, and where.
  double worst = 0.0;
  int64_t worstAt = -1;
  auto element = [&](int64_t at) -> double {
    if (c.cIsBF16)
      return toFloat(BFloat16{out[at]});
    float value;
    std::memcpy(&value, &out[2 * at], sizeof(value));
    return value;
  };
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        int64_t logical = (bi * c.m + i) * c.n + j;
        double e = product[logical], sumAbs = absProduct[logical];
        double bound =
            gamma * sumAbs + halfUlp * (std::fabs(e) + gamma * sumAbs);
        double err = std::fabs(element(bi * strideC + i * ldc + j) - e);
        // NaN (an element not written, or padding read) fails too.
        double ratio = err == 0.0 ? 0.0 : err / bound;
        if (!(ratio <= worst)) {
          worst = std::isnan(ratio) ? std::numeric_limits<double>::infinity()
                                    : ratio;
          worstAt = logical;
        }
      }
  EXPECT_LE(worst, 1.0) << "at logical element " << worstAt
                        << " (batch, row, column of [batch, m, n])";
  // Every element of C outside the m x n blocks keeps its bits.
  int64_t elementBytes = c.cIsBF16 ? 2 : 4;
  auto unchanged = [&](int64_t at) {
    return std::memcmp(&out[at * elementBytes / 2],
                       &c0Bits[at * elementBytes / 2], elementBytes) == 0;
  };
  int64_t touched = 0;
  for (int64_t at = 0; at < c.batch * strideC; ++at) {
    int64_t inBatch = at % strideC, row = inBatch / ldc, col = inBatch % ldc;
    if (row < c.m && col < c.n)
      continue;
    touched += !unchanged(at);
  }
  EXPECT_EQ(touched, 0) << "elements of C's padding written";
}

TEST(KernelsTest, GemmBF16AllTransposesBothOutputTypes) {
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (bool cIsBF16 : {false, true}) {
        checkGemmBF16({3, 5, 7, 9, transA, transB, cIsBF16, 3, false});
        checkGemmBF16({1, 67, 45, 130, transA, transB, cIsBF16, 0, true});
      }
}

TEST(KernelsTest, GemmBF16BatchedPackedAndStridedC) {
  // strideC == m * ldc: one matmul over the batch; otherwise one per GEMM.
  for (bool packedC : {true, false})
    for (bool cIsBF16 : {false, true}) {
      checkGemmBF16({4, 33, 17, 64, false, true, cIsBF16, 0, packedC});
      checkGemmBF16({4, 33, 17, 64, true, false, cIsBF16, 5, packedC});
      checkGemmBF16({6, 40, 24, 96, false, false, cIsBF16, 2, packedC});
    }
}

TEST(KernelsTest, GemmBF16LeadingDimensionsLargerThanRows) {
  for (bool cIsBF16 : {false, true})
    for (int64_t pad : {1, 8, 31}) {
      checkGemmBF16({2, 19, 23, 37, false, false, cIsBF16, pad, true});
      checkGemmBF16({2, 19, 23, 37, true, true, cIsBF16, pad, false});
      checkGemmBF16({1, 1, 1, 1, false, false, cIsBF16, pad, true});
    }
  // Large enough for oneDNN's blocked kernels in every dimension.
  checkGemmBF16({1, 301, 203, 517, true, false, false, 16, true});
  checkGemmBF16({2, 129, 257, 300, false, true, true, 7, false});
}

TEST(KernelsTest, GemmBF16WithEmptyContractionZeroFillsC) {
  for (bool cIsBF16 : {false, true}) {
    SCOPED_TRACE(cIsBF16 ? "bf16 C" : "f32 C");
    // 2 batches of 2x3 in rows of 4, 9 apart: padding must survive.
    int64_t ldc = 4, strideC = 9, elementBytes = cIsBF16 ? 2 : 4;
    std::vector<uint8_t> c(2 * strideC * elementBytes, 0xab);
    std::vector<uint8_t> expected = c;
    for (int64_t bi = 0; bi < 2; ++bi)
      for (int64_t i = 0; i < 2; ++i)
        std::memset(&expected[(bi * strideC + i * ldc) * elementBytes], 0,
                    3 * elementBytes);
    gemmBF16(2, false, false, 2, 3, 0, nullptr, 1, 0, nullptr, 3, 0, c.data(),
             cIsBF16, ldc, strideC);
    EXPECT_EQ(c, expected);
  }
}

// One product a call runs oneDNN's blocked matmul whatever batch stride it
// is given: with a 0 (sdrun --calibrate's 2048³ product) it once picked the
// scalar reference matmul, which took minutes. The product is the same.
TEST(KernelsTest, GemmBF16OneProductIgnoresItsBatchStride) {
  if (!bf16ProductPath().native)
    GTEST_SKIP() << "no bf16 units here: bf16 products widen to f32";
  int64_t m = 64, n = 48, k = 80;
  for (bool transA : {false, true})
    for (int64_t stride : {int64_t(0), int64_t(5), m * k}) {
      SCOPED_TRACE(testing::Message()
                   << "transA " << transA << " batch stride " << stride);
      std::string implementation =
          gemmBF16Implementation(1, transA, false, m, n, k, transA ? m : k,
                                 stride, n, stride, false, n, 0);
      EXPECT_FALSE(implementation.empty());
      EXPECT_EQ(implementation.find("ref"), std::string::npos)
          << implementation;
    }
  std::vector<sd_bf16> a = randomBF16(m * k, 16), b = randomBF16(k * n, 17);
  std::vector<float> dense(m * n), unstrided(m * n, -1.0f);
  gemmBF16(1, false, false, m, n, k, a.data(), k, m * k, b.data(), n, k * n,
           dense.data(), false, n, m * n);
  gemmBF16(1, false, false, m, n, k, a.data(), k, 0, b.data(), n, 0,
           unstrided.data(), false, n, 0);
  EXPECT_EQ(dense, unstrided);
}

TEST(KernelsTest, GemmBF16IsDeterministic) {
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (bool cIsBF16 : {false, true})
        for (auto [batch, m, n, k] :
             {std::array<int64_t, 4>{8, 129, 77, 300},
              std::array<int64_t, 4>{1, 300, 500, 700}}) {
          SCOPED_TRACE(testing::Message()
                       << "transA " << transA << " transB " << transB
                       << " cIsBF16 " << cIsBF16 << " batch " << batch);
          std::vector<sd_bf16> a = randomBF16(batch * m * k, 14),
                               b = randomBF16(batch * k * n, 15);
          size_t bytes = batch * m * n * (cIsBF16 ? 2 : 4);
          std::vector<uint8_t> c1(bytes), c2(bytes, 0xff);
          for (std::vector<uint8_t> *c : {&c1, &c2})
            gemmBF16(batch, transA, transB, m, n, k, a.data(), transA ? m : k,
                     m * k, b.data(), transB ? k : n, k * n, c->data(), cIsBF16,
                     n, m * n);
          EXPECT_TRUE(c1 == c2);
        }
}

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

void checkTranspose(std::vector<int64_t> shape, std::vector<int64_t> perm) {
  SCOPED_TRACE(testing::Message() << "perm of rank " << perm.size() << ": "
                                  << testing::PrintToString(perm));
  std::vector<float> in = randomFloats(ref::shapeProduct(shape), 6);
  std::vector<float> out(in.size(), -7.0f);
  transpose(in.data(), out.data(), static_cast<int32_t>(shape.size()),
            shape.data(), perm.data());
  Tensor expected = ref::transpose(toTensor(in, shape), perm);
  // A permutation moves values: exact equality.
  EXPECT_EQ(ref::maxAbsoluteDifference(fromFloats(out.data(), expected.shape()),
                                       expected),
            0.0);
}

TEST(KernelsTest, TransposeSeveralPermutations) {
  std::vector<int64_t> shape = {3, 5, 7, 2};
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 1, 2, 3},
                                    {0, 1, 3, 2},
                                    {3, 2, 1, 0},
                                    {1, 0, 2, 3},
                                    {2, 0, 3, 1},
                                    {0, 2, 1, 3},
                                    {1, 2, 3, 0}})
    checkTranspose(shape, perm);
  // Larger than one tile in both dimensions, and with size-1 dimensions.
  checkTranspose({67, 45}, {1, 0});
  checkTranspose({2, 3, 70, 33}, {0, 1, 3, 2});
  checkTranspose({1, 5, 1, 40, 3}, {4, 2, 3, 0, 1});
  checkTranspose({2, 1, 3, 1, 2, 1, 2, 3}, {7, 6, 5, 4, 3, 2, 1, 0});
}

/// transpose() of 2-byte elements against the f32 path on the same shape:
/// the f32 path moves each element's input position (exact in f32), which
/// says where every 2-byte element must land. The 2-byte elements are random
/// bits, NaN and infinity patterns among them: they are moved, never read
/// as numbers, so the comparison is bitwise.
void checkTransposeBF16(std::vector<int64_t> shape, std::vector<int64_t> perm) {
  SCOPED_TRACE(testing::Message()
               << "2-byte elements, shape " << testing::PrintToString(shape)
               << ", perm " << testing::PrintToString(perm));
  int64_t count = ref::shapeProduct(shape);
  int32_t rank = static_cast<int32_t>(shape.size());
  std::vector<float> positions(count), moved(count, -1.0f);
  for (int64_t i = 0; i < count; ++i)
    positions[i] = static_cast<float>(i);
  transpose(positions.data(), moved.data(), rank, shape.data(), perm.data(), 4);
  std::vector<uint16_t> in(count), out(count, 0xdead);
  std::mt19937 gen(16);
  for (uint16_t &x : in)
    x = static_cast<uint16_t>(gen());
  transpose(in.data(), out.data(), rank, shape.data(), perm.data(), 2);
  int64_t wrong = 0, firstWrong = -1;
  for (int64_t i = 0; i < count; ++i) {
    auto from = static_cast<int64_t>(moved[i]);
    if ((from < 0 || from >= count || out[i] != in[from]) && wrong++ == 0)
      firstWrong = i;
  }
  EXPECT_EQ(wrong, 0) << "first wrong output element " << firstWrong;
}

TEST(KernelsTest, TransposeBF16MatchesF32Permutation) {
  std::vector<int64_t> shape = {3, 5, 7, 2};
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 1, 2, 3},
                                    {0, 1, 3, 2},
                                    {3, 2, 1, 0},
                                    {1, 0, 2, 3},
                                    {2, 0, 3, 1},
                                    {0, 2, 1, 3},
                                    {1, 2, 3, 0}})
    checkTransposeBF16(shape, perm);
  // No-op permutations: a copy.
  checkTransposeBF16({70, 45}, {0, 1});
  checkTransposeBF16({11}, {0});
  // Larger than one tile (32) in both dimensions, with partial tiles.
  checkTransposeBF16({70, 45}, {1, 0});
  checkTransposeBF16({64, 96}, {1, 0});
  checkTransposeBF16({3, 70, 45}, {0, 2, 1});
  checkTransposeBF16({2, 3, 70, 33}, {0, 1, 3, 2});
  // [B, S, H, D] -> [B, H, S, D]: the innermost dimension stays innermost.
  checkTransposeBF16({2, 40, 6, 16}, {0, 2, 1, 3});
  // Size-1 dimensions.
  checkTransposeBF16({1, 5, 1, 40, 3}, {4, 2, 3, 0, 1});
  checkTransposeBF16({2, 1, 3, 1, 2, 1, 2, 3}, {7, 6, 5, 4, 3, 2, 1, 0});
}

//===----------------------------------------------------------------------===//
// Softmax and normalizations
//===----------------------------------------------------------------------===//

TEST(KernelsTest, SoftmaxAlongEveryDimension) {
  std::vector<int64_t> shape = {3, 5, 7};
  // Large logits: the maximum must be subtracted.
  std::vector<float> in = randomFloats(105, 7, -30.0f, 80.0f);
  for (int32_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    std::vector<float> out(in.size());
    softmax(in.data(), out.data(), 3, shape.data(), dim);
    Tensor expected = ref::softmax(toTensor(in, shape), dim);
    EXPECT_LT(ref::maxRelativeDifference(fromFloats(out.data(), shape),
                                         expected, 1e-30),
              kTol);
  }
}

TEST(KernelsTest, SoftmaxLongRowsInPlaceWithInfinities) {
  std::vector<int64_t> shape = {3, 1001};
  std::vector<float> in = randomFloats(3003, 8, -5.0f, 5.0f);
  in[17] = -std::numeric_limits<float>::infinity();
  in[1500] = -std::numeric_limits<float>::infinity();
  Tensor expected = ref::softmax(toTensor(in, shape), 1);
  softmax(in.data(), in.data(), 2, shape.data(), 1);
  EXPECT_EQ(in[17], 0.0f);
  EXPECT_LT(
      ref::maxRelativeDifference(fromFloats(in.data(), shape), expected, 1e-30),
      kTol);
}

TEST(KernelsTest, LayerNormMatchesReference) {
  int64_t rows = 5, cols = 37;
  // An offset mean tests the statistics' stability.
  std::vector<float> in = randomFloats(rows * cols, 9, 99.0f, 101.0f);
  std::vector<float> scale = randomFloats(cols, 10),
                     bias = randomFloats(cols, 11);
  Tensor x = toTensor(in, {rows, cols});
  Tensor s = toTensor(scale, {cols}), b = toTensor(bias, {cols});
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const float *sp = variant == 2 ? nullptr : scale.data();
    const float *bp = variant >= 1 ? nullptr : bias.data();
    std::vector<float> out(in.size());
    layerNorm(in.data(), sp, bp, out.data(), rows, cols, 1e-5);
    Tensor expected =
        ref::layerNorm(x, sp ? &s : nullptr, bp ? &b : nullptr, 1e-5);
    EXPECT_LT(ref::maxRelativeDifference(fromFloats(out.data(), {rows, cols}),
                                         expected, 0.1),
              kNormTol);
  }
}

TEST(KernelsTest, RmsNormMatchesReference) {
  int64_t rows = 7, cols = 29;
  std::vector<float> in = randomFloats(rows * cols, 12);
  std::vector<float> scale = randomFloats(cols, 13);
  Tensor s = toTensor(scale, {cols});
  for (bool withScale : {true, false}) {
    std::vector<float> out(in.size());
    rmsNorm(in.data(), withScale ? scale.data() : nullptr, out.data(), rows,
            cols, 1e-6);
    Tensor expected = ref::rmsNorm(toTensor(in, {rows, cols}),
                                   withScale ? &s : nullptr, 1e-6);
    EXPECT_LT(ref::maxRelativeDifference(fromFloats(out.data(), {rows, cols}),
                                         expected, 0.1),
              kNormTol);
  }
}

/// `values` rounded to bf16, as the bf16 kernels' operands.
static std::vector<sd_bf16> toBF16(const std::vector<float> &values) {
  std::vector<sd_bf16> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i].bits = toBFloat16(values[i]).bits;
  return out;
}

/// `values` widened (exactly).
static std::vector<float> fromBF16(const std::vector<sd_bf16> &values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = toFloat(BFloat16{values[i].bits});
  return out;
}

/// Whether a bf16 kernel's result is, bit for bit, the f32 kernel's result
/// on the widened operands, rounded: what the lowering computed with
/// converts around the f32 kernel before the bf16 kernels existed.
static void expectRoundedF32Result(const std::vector<sd_bf16> &got,
                                   const std::vector<float> &f32) {
  std::vector<sd_bf16> want = toBF16(f32);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i].bits, want[i].bits) << "element " << i;
}

TEST(KernelsTest, SoftmaxBF16IsTheRoundedF32Softmax) {
  std::vector<int64_t> shape = {3, 5, 70};
  std::vector<sd_bf16> in = toBF16(randomFloats(3 * 5 * 70, 31, -8, 8));
  std::vector<float> wide = fromBF16(in);
  for (int32_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    std::vector<float> f32(wide.size());
    softmax(wide.data(), f32.data(), 3, shape.data(), dim);
    std::vector<sd_bf16> got(in.size());
    softmaxBF16(in.data(), got.data(), 3, shape.data(), dim);
    expectRoundedF32Result(got, f32);
  }
}

TEST(KernelsTest, NormsBF16AreTheRoundedF32Norms) {
  int64_t rows = 9, cols = 45;
  std::vector<sd_bf16> in = toBF16(randomFloats(rows * cols, 32, 9.0f, 11.0f));
  std::vector<sd_bf16> scale = toBF16(randomFloats(cols, 33)),
                       bias = toBF16(randomFloats(cols, 34));
  std::vector<float> x = fromBF16(in), s = fromBF16(scale), b = fromBF16(bias);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    bool withScale = variant != 2, withBias = variant == 0;
    std::vector<float> f32(x.size());
    layerNorm(x.data(), withScale ? s.data() : nullptr,
              withBias ? b.data() : nullptr, f32.data(), rows, cols, 1e-6);
    std::vector<sd_bf16> got(in.size());
    layerNormBF16(in.data(), withScale ? scale.data() : nullptr,
                  withBias ? bias.data() : nullptr, got.data(), rows, cols,
                  1e-6);
    expectRoundedF32Result(got, f32);
    rmsNorm(x.data(), withScale ? s.data() : nullptr, f32.data(), rows, cols,
            1e-6);
    rmsNormBF16(in.data(), withScale ? scale.data() : nullptr, got.data(), rows,
                cols, 1e-6);
    expectRoundedF32Result(got, f32);
  }
}

TEST(KernelsTest, GroupNormBF16IsTheRoundedF32GroupNorm) {
  // Two samples of 6 positions; 12 channels in 3 groups (rows of 4,
  // converted inline) and 80 in 2 (rows of 40, converted by the vector
  // code); values far from zero so that the centering matters; with and
  // without scale and bias, and on teams of 1 and 2 threads.
  int64_t n = 2, spatial = 6;
  int saved = omp_get_max_threads();
  for (auto [channels, groups] :
       {std::pair<int64_t, int64_t>{12, 3}, {80, 2}}) {
    std::vector<sd_bf16> in =
        toBF16(randomFloats(n * spatial * channels, 35, 9.0f, 11.0f));
    std::vector<sd_bf16> scale = toBF16(randomFloats(channels, 36)),
                         bias = toBF16(randomFloats(channels, 37));
    std::vector<float> x = fromBF16(in), s = fromBF16(scale),
                       b = fromBF16(bias);
    for (int threads : {1, 2})
      for (bool affine : {true, false}) {
        SCOPED_TRACE(testing::Message() << channels << " channels, " << threads
                                        << " threads, affine " << affine);
        omp_set_num_threads(threads);
        std::vector<float> f32(x.size());
        groupNorm(x.data(), affine ? s.data() : nullptr,
                  affine ? b.data() : nullptr, f32.data(), n, spatial, channels,
                  groups, 1e-5);
        std::vector<sd_bf16> got(in.size());
        groupNormBF16(in.data(), affine ? scale.data() : nullptr,
                      affine ? bias.data() : nullptr, got.data(), n, spatial,
                      channels, groups, 1e-5);
        expectRoundedF32Result(got, f32);
      }
  }
  omp_set_num_threads(saved);
}

TEST(KernelsTest, GroupNormMatchesReference) {
  int64_t n = 3, spatial = 15, channels = 12, groups = 4;
  std::vector<float> in = randomFloats(n * spatial * channels, 14, -3.0f, 5.0f);
  std::vector<float> scale = randomFloats(channels, 15);
  std::vector<float> bias = randomFloats(channels, 16);
  Tensor s = toTensor(scale, {channels}), b = toTensor(bias, {channels});
  for (bool affine : {true, false}) {
    std::vector<float> out(in.size());
    groupNorm(in.data(), affine ? scale.data() : nullptr,
              affine ? bias.data() : nullptr, out.data(), n, spatial, channels,
              groups, 1e-5);
    Tensor expected = ref::groupNorm(toTensor(in, {n, spatial, channels}),
                                     affine ? &s : nullptr,
                                     affine ? &b : nullptr, groups, 1e-5);
    EXPECT_LT(
        ref::maxRelativeDifference(
            fromFloats(out.data(), {n, spatial, channels}), expected, 0.1),
        kNormTol);
  }
}

TEST(KernelsTest, NormalizationsAreDeterministic) {
  int64_t rows = 64, cols = 384;
  std::vector<float> in = randomFloats(rows * cols, 17);
  std::vector<float> o1(in.size()), o2(in.size());
  layerNorm(in.data(), nullptr, nullptr, o1.data(), rows, cols, 1e-6);
  layerNorm(in.data(), nullptr, nullptr, o2.data(), rows, cols, 1e-6);
  EXPECT_TRUE(bitwiseEqual(o1, o2));
  std::vector<int64_t> shape = {rows, cols};
  softmax(in.data(), o1.data(), 2, shape.data(), 1);
  softmax(in.data(), o2.data(), 2, shape.data(), 1);
  EXPECT_TRUE(bitwiseEqual(o1, o2));
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Runs `attention` with a scratch buffer sized for the current team.
std::vector<float> runAttention(const std::vector<float> &q,
                                const std::vector<float> &k,
                                const std::vector<float> &v, const float *mask,
                                int64_t maskB, int64_t maskH, int64_t b,
                                int64_t h, int64_t sq, int64_t skv, int64_t d,
                                int64_t dv, double scale) {
  std::vector<float> scratch(static_cast<size_t>(
      attentionScratchFloats(sq, skv, dv, omp_get_max_threads())));
  std::vector<float> out(static_cast<size_t>(b * h * sq * dv), -9.0f);
  attention(q.data(), k.data(), v.data(), mask, maskB, maskH, out.data(), b, h,
            sq, skv, d, dv, scale, scratch.data());
  return out;
}

void checkAttention(int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
                    int64_t dv, int64_t maskB, int64_t maskH, bool withMask) {
  SCOPED_TRACE(testing::Message()
               << "B " << b << " H " << h << " Sq " << sq << " Skv " << skv
               << " mask " << (withMask ? maskB : 0) << "x"
               << (withMask ? maskH : 0));
  std::vector<float> q = randomFloats(b * h * sq * d, 18, -2.0f, 2.0f);
  std::vector<float> k = randomFloats(b * h * skv * d, 19, -2.0f, 2.0f);
  std::vector<float> v = randomFloats(b * h * skv * dv, 20);
  std::vector<float> mask;
  if (withMask) {
    std::mt19937 gen(21);
    mask.resize(static_cast<size_t>(maskB * maskH * sq * skv));
    for (float &m : mask)
      m = gen() % 3 == 0 ? 0.0f : 1.0f;
    // Query row 1 of the first mask head sees no key.
    std::fill(mask.begin() + skv, mask.begin() + 2 * skv, 0.0f);
  }
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<float> out =
      runAttention(q, k, v, withMask ? mask.data() : nullptr, maskB, maskH, b,
                   h, sq, skv, d, dv, scale);
  Tensor maskTensor =
      withMask ? toTensor(mask, {maskB, maskH, sq, skv}) : Tensor();
  Tensor expected = ref::attention(
      toTensor(q, {b, h, sq, d}), toTensor(k, {b, h, skv, d}),
      toTensor(v, {b, h, skv, dv}), withMask ? &maskTensor : nullptr, scale);
  EXPECT_LT(ref::maxRelativeDifference(fromFloats(out.data(), {b, h, sq, dv}),
                                       expected, 1e-2),
            kTol);
  if (withMask) {
    for (int64_t j = 0; j < dv; ++j)
      EXPECT_EQ(out[dv + j], 0.0f) << "fully masked row must be zero";
  }
}

TEST(KernelsTest, AttentionWithoutMask) {
  checkAttention(2, 3, 5, 7, 4, 6, 1, 1, false);
  // Fewer heads than threads: query rows are split.
  checkAttention(1, 1, 37, 19, 8, 5, 1, 1, false);
}

TEST(KernelsTest, AttentionWithFullAndBroadcastMasks) {
  checkAttention(2, 3, 5, 7, 4, 6, 2, 3, true);
  checkAttention(2, 3, 5, 7, 4, 6, 1, 3, true);
  checkAttention(2, 3, 5, 7, 4, 6, 2, 1, true);
  checkAttention(2, 3, 5, 7, 4, 6, 1, 1, true);
  checkAttention(1, 1, 9, 11, 3, 2, 1, 1, true);
}

TEST(KernelsTest, AttentionIsDeterministic) {
  int64_t b = 2, h = 6, s = 64, d = 32;
  std::vector<float> q = randomFloats(b * h * s * d, 22);
  std::vector<float> k = randomFloats(b * h * s * d, 23);
  std::vector<float> v = randomFloats(b * h * s * d, 24);
  std::vector<float> o1 =
      runAttention(q, k, v, nullptr, 1, 1, b, h, s, s, d, d, 0.125);
  std::vector<float> o2 =
      runAttention(q, k, v, nullptr, 1, 1, b, h, s, s, d, d, 0.125);
  EXPECT_TRUE(bitwiseEqual(o1, o2));
}

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

TEST(KernelsTest, RngBlockEqualsReference) {
  std::vector<int64_t> global = {6, 9, 11}, offsets = {2, 3, 5},
                       local = {3, 5, 4};
  int64_t n = ref::shapeProduct(local);
  for (bool normal : {true, false}) {
    SCOPED_TRACE(normal ? "normal" : "uniform");
    std::vector<float> out(static_cast<size_t>(n));
    double a = normal ? 0.5 : -2.0, b = normal ? 0.02 : 3.0;
    rng(normal, 1234, out.data(), 3, local.data(), global.data(),
        offsets.data(), a, b);
    Tensor expected = normal ? ref::rngNormalSlice(global, offsets, local, 1234,
                                                   a, b, DType::F32)
                             : ref::rngUniformSlice(global, offsets, local,
                                                    1234, a, b, DType::F32);
    expected.roundToDType();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], static_cast<float>(expected[i])) << "element " << i;
  }
}

TEST(KernelsTest, RngScalar) {
  float out = 0;
  int64_t none = 0;
  rng(false, 7, &out, 0, &none, &none, &none, 1.0, 2.0);
  EXPECT_EQ(out, static_cast<float>(1.0 + ref::uniformAt(7, 0)));
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// Magnitudes, for the terms of an error bound.
static std::vector<float> magnitudes(std::vector<float> values) {
  for (float &value : values)
    value = std::fabs(value);
  return values;
}

/// Checks a convolution kernel's result `got` against the exact `want` of
/// its operands: the kernel sums `terms` products in f32 (within
/// γ(terms + 3)·Σ|products| of the exact sum, `magnitude` holding
/// Σ|products| per element; checkConv says why) and, when `rounded`, rounds
/// that once to bf16 (within 2⁻⁸ of it, one bf16 unit roundoff).
static void expectWithinSumAndRounding(const std::vector<float> &got,
                                       const Tensor &want,
                                       const Tensor &magnitude, double terms,
                                       bool rounded, const char *what) {
  double u = std::ldexp(1.0, -24), n = terms + 3;
  double gamma = n * u / (1 - n * u);
  double roundoff = rounded ? std::ldexp(1.0, -8) : 0.0;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    double sumError = gamma * magnitude[i];
    double bound = sumError + roundoff * (std::fabs(want[i]) + sumError);
    ASSERT_LE(std::fabs(double(got[i]) - want[i]), bound)
        << what << " element " << i << " of " << want.numElements();
  }
}

void checkConv(std::vector<int64_t> inShape, std::vector<int64_t> kernelShape,
               std::array<int64_t, 2> strides, std::array<int64_t, 4> padding,
               int64_t groups, bool withBias) {
  SCOPED_TRACE(testing::Message() << "kernel " << kernelShape[0] << "x"
                                  << kernelShape[1] << " groups " << groups);
  std::vector<float> in = randomFloats(ref::shapeProduct(inShape), 25);
  std::vector<float> kernel = randomFloats(ref::shapeProduct(kernelShape), 26);
  std::vector<float> bias = randomFloats(kernelShape[3], 27);
  Tensor biasTensor = toTensor(bias, {kernelShape[3]});
  Tensor expected =
      ref::conv2d(toTensor(in, inShape), toTensor(kernel, kernelShape),
                  withBias ? &biasTensor : nullptr, strides, padding, groups);
  std::vector<int64_t> outShape = expected.shape();
  std::vector<float> out(static_cast<size_t>(expected.numElements()), -3.0f);
  // Exactly the scratch the kernel asks for (ASan sees an overrun).
  std::vector<float> scratch(static_cast<size_t>(conv2dScratchFloats(
      ConvPass::Forward, inShape.data(), kernelShape.data(), outShape.data(),
      strides.data(), padding.data(), groups, /*bf16=*/false)));
  conv2d(in.data(), kernel.data(), withBias ? bias.data() : nullptr, out.data(),
         inShape.data(), kernelShape.data(), outShape.data(), strides.data(),
         padding.data(), groups, scratch.empty() ? nullptr : scratch.data());
  // Summed in f32 in any order (the GEMM's blocking and vector width pick
  // one), an output of k products and a bias is within γ(k + 3)·Σ|terms|
  // of the exact sum, γ(n) = n·u / (1 − n·u) with u = 2⁻²⁴ (Higham,
  // "Accuracy and Stability of Numerical Algorithms", §3.1; the 3 for the
  // bias, the store and the reference's rounding): a fixed tolerance fails
  // a 1800-term sum on one CPU and passes it on another.
  Tensor absBias = toTensor(magnitudes(bias), {kernelShape[3]});
  Tensor terms =
      ref::conv2d(toTensor(magnitudes(in), inShape),
                  toTensor(magnitudes(kernel), kernelShape),
                  withBias ? &absBias : nullptr, strides, padding, groups);
  expectWithinSumAndRounding(
      out, expected, terms,
      double(kernelShape[0] * kernelShape[1] * kernelShape[2]),
      /*rounded=*/false, "forward");
  // And not far from it anywhere: the bound is not loose by orders.
  EXPECT_LT(ref::maxRelativeDifference(fromFloats(out.data(), outShape),
                                       expected, 1.0),
            1e-4);
}

/// conv2d's two gradients against the reference's, for the forward of
/// these shapes: the input gradient from a random dy and the kernel, the
/// filter gradient from a random input and dy, each writing over a buffer
/// of garbage with exactly the scratch the kernels ask for.
void checkConvGradients(std::vector<int64_t> inShape,
                        std::vector<int64_t> kernelShape,
                        std::array<int64_t, 2> strides,
                        std::array<int64_t, 4> padding, int64_t groups) {
  SCOPED_TRACE(testing::Message() << "kernel " << kernelShape[0] << "x"
                                  << kernelShape[1] << " strides " << strides[0]
                                  << "x" << strides[1] << " groups " << groups);
  std::vector<float> in = randomFloats(ref::shapeProduct(inShape), 31);
  std::vector<float> kernel = randomFloats(ref::shapeProduct(kernelShape), 32);
  Tensor forward =
      ref::conv2d(toTensor(in, inShape), toTensor(kernel, kernelShape), nullptr,
                  strides, padding, groups);
  std::vector<int64_t> outShape = forward.shape();
  std::vector<float> dy = randomFloats(ref::shapeProduct(outShape), 33);
  // The f32 passes borrow the same rows (ConvScratch.h).
  std::vector<float> scratch(static_cast<size_t>(conv2dScratchFloats(
      ConvPass::InputGrad, inShape.data(), kernelShape.data(), outShape.data(),
      strides.data(), padding.data(), groups, /*bf16=*/false)));
  ASSERT_EQ(static_cast<int64_t>(scratch.size()),
            conv2dScratchFloats(ConvPass::FilterGrad, inShape.data(),
                                kernelShape.data(), outShape.data(),
                                strides.data(), padding.data(), groups,
                                /*bf16=*/false));
  float *scratchData = scratch.empty() ? nullptr : scratch.data();

  Tensor wantDx = ref::conv2dInputGrad(toTensor(dy, outShape),
                                       toTensor(kernel, kernelShape), inShape,
                                       strides, padding, groups);
  std::vector<float> dx(in.size(), -3.0f);
  conv2dInputGrad(dy.data(), kernel.data(), dx.data(), inShape.data(),
                  kernelShape.data(), outShape.data(), strides.data(),
                  padding.data(), groups, scratchData);
  EXPECT_LT(
      ref::maxRelativeDifference(fromFloats(dx.data(), inShape), wantDx, 1.0),
      kTol)
      << "input gradient";

  Tensor wantDw =
      ref::conv2dFilterGrad(toTensor(in, inShape), toTensor(dy, outShape),
                            kernelShape, strides, padding, groups);
  std::vector<float> dw(kernel.size(), -3.0f);
  conv2dFilterGrad(in.data(), dy.data(), dw.data(), inShape.data(),
                   kernelShape.data(), outShape.data(), strides.data(),
                   padding.data(), groups, scratchData);
  // Each kernel element sums N·Ho·Wo products in f32: the rounding grows
  // like the square root of that length.
  double length = static_cast<double>(outShape[0] * outShape[1] * outShape[2]);
  EXPECT_LT(ref::maxRelativeDifference(fromFloats(dw.data(), kernelShape),
                                       wantDw, 1.0),
            kTol * std::max(1.0, std::sqrt(length / 64.0)))
      << "filter gradient";
}

/// A convolution's shapes and attributes: the input, the kernel, strides,
/// padding and groups.
struct ConvCase {
  std::vector<int64_t> in, kernel;
  std::array<int64_t, 2> strides;
  std::array<int64_t, 4> padding;
  int64_t groups;
};

/// The gradient tests' convolutions (f32 and bf16).
const ConvCase kGradientCases[] = {
    {{2, 7, 6, 4}, {3, 2, 2, 6}, {2, 1}, {1, 0, 1, 1}, 2},
    {{2, 5, 5, 3}, {3, 3, 3, 5}, {1, 1}, {1, 1, 1, 1}, 1},
    {{2, 9, 8, 4}, {3, 3, 4, 6}, {2, 2}, {1, 1, 1, 1}, 1},
    {{2, 8, 8, 4}, {2, 2, 4, 12}, {2, 2}, {0, 0, 0, 0}, 1},
    {{2, 3, 5, 7}, {1, 1, 7, 3}, {1, 1}, {0, 0, 0, 0}, 1},
    // 1.8 Mi elements of rows a sample: GEMMs of 2 samples, then of the
    // third.
    {{3, 32, 32, 200}, {3, 3, 200, 4}, {1, 1}, {1, 1, 1, 1}, 1},
};

TEST(KernelsTest, Conv2dGradientsMatchReference) {
  // Grouped, strided and asymmetrically padded; a same-size 3x3; a
  // stride-2 down-sampler whose last input row no output reads; patch
  // embedding; pointwise (one GEMM over all samples).
  for (const ConvCase &c : kGradientCases)
    checkConvGradients(c.in, c.kernel, c.strides, c.padding, c.groups);
}

TEST(KernelsTest, Conv2dMatchesReference) {
  checkConv({2, 7, 6, 4}, {3, 2, 2, 6}, {2, 1}, {1, 0, 1, 1}, 2, true);
  checkConv({1, 5, 5, 3}, {3, 3, 3, 5}, {1, 1}, {1, 1, 1, 1}, 1, false);
  // Patch embedding (2x2, stride 2) and a pointwise convolution.
  checkConv({2, 8, 8, 4}, {2, 2, 4, 12}, {2, 2}, {0, 0, 0, 0}, 1, true);
  checkConv({2, 3, 5, 7}, {1, 1, 7, 3}, {1, 1}, {0, 0, 0, 0}, 1, true);
  // 1.8 Mi floats of rows a sample: GEMMs of 2 samples, then of the third.
  checkConv({3, 32, 32, 200}, {3, 3, 200, 4}, {1, 1}, {1, 1, 1, 1}, 1, true);
}

/// The bf16 convolution kernels against the reference's double-precision
/// convolution of the operands as bf16 holds them, on teams of 1 and 2
/// threads: the forward with a bias, the input gradient, and the filter
/// gradient into an f32 and into a bf16 kernel, each writing over garbage
/// with exactly the scratch it asks for.
void checkConvBF16(std::vector<int64_t> inShape,
                   std::vector<int64_t> kernelShape,
                   std::array<int64_t, 2> strides,
                   std::array<int64_t, 4> padding, int64_t groups) {
  SCOPED_TRACE(testing::Message() << "kernel " << kernelShape[0] << "x"
                                  << kernelShape[1] << " strides " << strides[0]
                                  << "x" << strides[1] << " groups " << groups);
  std::vector<sd_bf16> in =
      toBF16(randomFloats(ref::shapeProduct(inShape), 41));
  std::vector<sd_bf16> kernel =
      toBF16(randomFloats(ref::shapeProduct(kernelShape), 42));
  std::vector<sd_bf16> bias = toBF16(randomFloats(kernelShape[3], 43));
  std::vector<float> x = fromBF16(in), w = fromBF16(kernel), b = fromBF16(bias);
  Tensor biasTensor = toTensor(b, {kernelShape[3]}),
         absBias = toTensor(magnitudes(b), {kernelShape[3]});
  Tensor forward = ref::conv2d(toTensor(x, inShape), toTensor(w, kernelShape),
                               &biasTensor, strides, padding, groups);
  std::vector<int64_t> outShape = forward.shape();
  Tensor forwardTerms = ref::conv2d(toTensor(magnitudes(x), inShape),
                                    toTensor(magnitudes(w), kernelShape),
                                    &absBias, strides, padding, groups);
  std::vector<sd_bf16> dy =
      toBF16(randomFloats(ref::shapeProduct(outShape), 44));
  std::vector<float> g = fromBF16(dy);
  Tensor wantDx =
      ref::conv2dInputGrad(toTensor(g, outShape), toTensor(w, kernelShape),
                           inShape, strides, padding, groups);
  Tensor dxTerms = ref::conv2dInputGrad(toTensor(magnitudes(g), outShape),
                                        toTensor(magnitudes(w), kernelShape),
                                        inShape, strides, padding, groups);
  Tensor wantDw =
      ref::conv2dFilterGrad(toTensor(x, inShape), toTensor(g, outShape),
                            kernelShape, strides, padding, groups);
  Tensor dwTerms = ref::conv2dFilterGrad(toTensor(magnitudes(x), inShape),
                                         toTensor(magnitudes(g), outShape),
                                         kernelShape, strides, padding, groups);
  auto scratchFor = [&](ConvPass pass) {
    return std::vector<float>(static_cast<size_t>(conv2dScratchFloats(
        pass, inShape.data(), kernelShape.data(), outShape.data(),
        strides.data(), padding.data(), groups, /*bf16=*/true)));
  };
  auto data = [](std::vector<float> &v) {
    return v.empty() ? nullptr : v.data();
  };
  const sd_bf16 garbage = toBF16({-3.0f})[0];
  int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    omp_set_num_threads(threads);
    std::vector<sd_bf16> out(static_cast<size_t>(forward.numElements()),
                             garbage);
    std::vector<float> scratch = scratchFor(ConvPass::Forward);
    conv2d(in.data(), kernel.data(), bias.data(), out.data(), inShape.data(),
           kernelShape.data(), outShape.data(), strides.data(), padding.data(),
           groups, data(scratch));
    expectWithinSumAndRounding(
        fromBF16(out), forward, forwardTerms,
        double(kernelShape[0] * kernelShape[1] * kernelShape[2] + 1), true,
        "forward");

    std::vector<sd_bf16> dx(in.size(), garbage);
    scratch = scratchFor(ConvPass::InputGrad);
    conv2dInputGrad(dy.data(), kernel.data(), dx.data(), inShape.data(),
                    kernelShape.data(), outShape.data(), strides.data(),
                    padding.data(), groups, data(scratch));
    expectWithinSumAndRounding(
        fromBF16(dx), wantDx, dxTerms,
        double(kernelShape[0] * kernelShape[1] * kernelShape[3]), true,
        "input gradient");

    double length = double(outShape[0] * outShape[1] * outShape[2]);
    scratch = scratchFor(ConvPass::FilterGrad);
    std::vector<float> dw32(kernel.size(), -3.0f);
    conv2dFilterGrad(in.data(), dy.data(), dw32.data(), /*dkernelIsBF16=*/false,
                     inShape.data(), kernelShape.data(), outShape.data(),
                     strides.data(), padding.data(), groups, data(scratch));
    expectWithinSumAndRounding(dw32, wantDw, dwTerms, length, false,
                               "f32 filter gradient");
    std::vector<sd_bf16> dw16(kernel.size(), garbage);
    conv2dFilterGrad(in.data(), dy.data(), dw16.data(), /*dkernelIsBF16=*/true,
                     inShape.data(), kernelShape.data(), outShape.data(),
                     strides.data(), padding.data(), groups, data(scratch));
    // The bf16 kernel is the f32 one rounded once.
    expectRoundedF32Result(dw16, dw32);
  }
  omp_set_num_threads(saved);
}

TEST(KernelsTest, Conv2dBF16MatchesReference) {
  // As Conv2dGradientsMatchReference: grouped, strided and asymmetrically
  // padded; a same-size 3x3; a stride-2 down-sampler; patch embedding;
  // pointwise (one GEMM rounding once); and rows of 1.8 Mi elements a
  // sample, so two chunks whose filter-gradient partials are summed.
  for (const ConvCase &c : kGradientCases)
    checkConvBF16(c.in, c.kernel, c.strides, c.padding, c.groups);
}

TEST(KernelsTest, Conv2dBF16FilterGradientOfNoSamplesIsZero) {
  // An empty batch: every element of a 3x3 kernel's gradient is zero, in
  // either type, over a buffer of garbage.
  std::array<int64_t, 4> in = {0, 6, 6, 4}, k = {3, 3, 4, 8},
                         out = {0, 6, 6, 8};
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> padding = {1, 1, 1, 1};
  std::vector<float> scratch(static_cast<size_t>(
      conv2dScratchFloats(ConvPass::FilterGrad, in.data(), k.data(), out.data(),
                          strides.data(), padding.data(), 1, /*bf16=*/true)));
  std::vector<float> dw32(3 * 3 * 4 * 8, -3.0f);
  conv2dFilterGrad(static_cast<const sd_bf16 *>(nullptr), nullptr, dw32.data(),
                   /*dkernelIsBF16=*/false, in.data(), k.data(), out.data(),
                   strides.data(), padding.data(), 1, scratch.data());
  for (float v : dw32)
    ASSERT_EQ(v, 0.0f);
  std::vector<sd_bf16> dw16(dw32.size(), toBF16({-3.0f})[0]);
  conv2dFilterGrad(static_cast<const sd_bf16 *>(nullptr), nullptr, dw16.data(),
                   /*dkernelIsBF16=*/true, in.data(), k.data(), out.data(),
                   strides.data(), padding.data(), 1, scratch.data());
  for (sd_bf16 v : dw16)
    ASSERT_EQ(v.bits, 0);
}

TEST(KernelsTest, Conv2dBF16ScratchIsWhatTheMemoryModelCounts) {
  // A 3x3 conv of 2 samples of 6x6x4 into 8 channels, stride 2 (rows
  // [2·9, 36] a chunk): bf16 rows take half the floats, aligned to 16.
  std::array<int64_t, 4> in = {2, 6, 6, 4}, k = {3, 3, 4, 8},
                         out = {2, 3, 3, 8};
  std::array<int64_t, 2> strides = {2, 2};
  std::array<int64_t, 4> padding = {1, 1, 1, 1};
  auto floats = [&](ConvPass pass, bool bf16) {
    return conv2dScratchFloats(pass, in.data(), k.data(), out.data(),
                               strides.data(), padding.data(), 1, bf16);
  };
  // 648 elements of rows; in bf16, 324 floats, aligned to 336.
  EXPECT_EQ(floats(ConvPass::Forward, false), 648);
  EXPECT_EQ(floats(ConvPass::FilterGrad, false), 648);
  // bf16: the rows, then the f32 products [2·9, 8].
  EXPECT_EQ(floats(ConvPass::Forward, true), 336 + 144);
  // f32 cotangent rows (648, aligned to 656), then the f32 image of both
  // samples [2, 6, 6, 4].
  EXPECT_EQ(floats(ConvPass::InputGrad, true), 656 + 288);
  // bf16 rows, a group's partial [36, 8] and the sum [36, 8].
  EXPECT_EQ(floats(ConvPass::FilterGrad, true), 336 + 288 + 288);
}

} // namespace
} // namespace sd::rt::kernels
