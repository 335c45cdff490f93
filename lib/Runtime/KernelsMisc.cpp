//===- KernelsMisc.cpp - Transpose, softmax, rng and convolution ----------===//
//
// The data-movement and small kernels of SdApi. Each parallelizes over
// independent output blocks with static schedules, so every output element
// is produced by the same sequence of operations whatever the thread that
// computes it.
//
//===----------------------------------------------------------------------===//

#include "sd/Reference/Random.h"
#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/Kernels.h"

#include "BFloat16Avx512.h"
#include "KernelsDetail.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace sd::rt::kernels {

//===----------------------------------------------------------------------===//
// Exponentials (KernelsDetail.h: shared with the attention kernels)
//===----------------------------------------------------------------------===//

namespace detail {

// The polynomial and range reduction of Cephes' expf: relative error below
// 2 ulp on the range where the result is a normal float. Below that range
// the result is 0 (so exp(-inf) = 0), above it +inf; NaN stays NaN.
static constexpr float kExpHi = 88.3762626647949f;
static constexpr float kExpLo = -87.3365447504f;
static constexpr float kLog2e = 1.44269504088896341f;
static constexpr float kLn2Hi = 0.693359375f;
static constexpr float kLn2Lo = -2.12194440e-4f;
static constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f,
                       kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                       kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

/// Eight exponentials with AVX2 + FMA.
__attribute__((target("avx2,fma"))) static inline __m256 exp8(__m256 x) {
  __m256 tooSmall = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ);
  __m256 tooBig = _mm256_cmp_ps(x, _mm256_set1_ps(kExpHi), _CMP_GT_OQ);
  __m256 isNan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)),
                            _mm256_set1_ps(kExpHi));
  __m256 fx = _mm256_floor_ps(
      _mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Lo), r);
  __m256 y = _mm256_set1_ps(kP0);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP1));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP2));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP3));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP4));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP5));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r),
                      _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^fx; fx lies in [-126, 128) so the biased exponent is in range, except
  // 128 (x near kExpHi), which the split into two factors handles.
  __m256i n = _mm256_cvtps_epi32(fx);
  __m256i half = _mm256_srai_epi32(n, 1);
  __m256 p1 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_add_epi32(_mm256_sub_epi32(n, half), _mm256_set1_epi32(127)), 23));
  y = _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), tooSmall);
  y = _mm256_blendv_ps(
      y, _mm256_set1_ps(std::numeric_limits<float>::infinity()), tooBig);
  return _mm256_blendv_ps(y, x, isNan);
}

// A row's sum of exponentials is kept in sixteen float lanes, element i in
// lane i % 16, each lane adding its elements in order; the lanes are then
// added in double, in lane order. The AVX2 path keeps lanes 0-7 and 8-15
// in two registers, the AVX-512 path in one, so both give the same bits.

/// row[i] = exp(row[i] - shift) for i in [start, n), eight at a time (the
/// tail masked); `start` is a multiple of 16, and each chunk of eight is
/// added to `lo` (lanes 0-7) or `hi` (lanes 8-15).
__attribute__((target("avx2,fma"))) static void
expShiftedFromAvx2(float *row, int64_t start, int64_t n, float shift,
                   __m256 &lo, __m256 &hi) {
  __m256 s = _mm256_set1_ps(shift);
  int64_t i = start;
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + i), s));
    _mm256_storeu_ps(row + i, e);
    __m256 &acc = (i & 8) ? hi : lo;
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    // The tail through the same vector code, masked (adding zeros).
    alignas(32) int32_t lanes[8];
    for (int j = 0; j < 8; ++j)
      lanes[j] = i + j < n ? -1 : 0;
    __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i *>(lanes));
    __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(row + i, mask), s));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(row + i, mask, e);
    __m256 &acc = (i & 8) ? hi : lo;
    acc = _mm256_add_ps(acc, e);
  }
}

/// The sum of the sixteen lanes, in double, in lane order.
__attribute__((target("avx2,fma"))) static double laneSum(__m256 lo,
                                                          __m256 hi) {
  alignas(32) float lane[16];
  _mm256_store_ps(lane, lo);
  _mm256_store_ps(lane + 8, hi);
  double sum = 0.0;
  for (float v : lane)
    sum += v;
  return sum;
}

/// row[i] = exp(row[i] - shift) for i < n; returns the sum (see above).
__attribute__((target("avx2,fma"))) static double
expShiftedAvx2(float *row, int64_t n, float shift) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  expShiftedFromAvx2(row, 0, n, shift, lo, hi);
  return laneSum(lo, hi);
}

// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused
// merge operand, which -Wmaybe-uninitialized and -Wuninitialized report at
// every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

/// exp8's sixteen-lane form with AVX-512F: the same operations lane by lane
/// but for the scaling by 2^fx, which gives the same bits.
__attribute__((target("avx512f,avx2,fma"))) static inline __m512
exp16(__m512 x) {
  __mmask16 tooSmall =
      _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_LT_OQ);
  __mmask16 tooBig = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpHi), _CMP_GT_OQ);
  __mmask16 isNan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)),
                            _mm512_set1_ps(kExpHi));
  __m512 fx = _mm512_roundscale_ps(
      _mm512_fmadd_ps(xc, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Lo), r);
  __m512 y = _mm512_set1_ps(kP0);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP1));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP2));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP3));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP4));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP5));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r),
                      _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // y·2^fx in one instruction: exact, as exp8's two power-of-two factors
  // are, since every result of the clamped range is a normal float.
  y = _mm512_scalef_ps(y, fx);
  y = _mm512_mask_mov_ps(y, tooSmall, _mm512_setzero_ps());
  y = _mm512_mask_mov_ps(
      y, tooBig, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  return _mm512_mask_mov_ps(y, isNan, x);
}

/// expShiftedAvx2 sixteen at a time: the same exponentials in the same
/// lanes, so the result does not depend on which path ran. With `low`, each
/// exponential is also rounded to bf16 there while it is in a register.
__attribute__((target("avx512f,avx2,fma"))) static double
expShiftedAvx512(float *row, int64_t n, float shift, BFloat16 *low = nullptr) {
  __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i), s));
    _mm512_storeu_ps(row + i, e);
    if (low)
      rt::detail::storeRoundedAvx512(e, low + i);
    acc = _mm512_add_ps(acc, e);
  }
  __m256 lo = _mm512_castps512_ps256(acc);
  __m256 hi =
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  expShiftedFromAvx2(row, i, n, shift, lo, hi);
  if (low)
    convertToBFloat16(row + i, low + i, n - i);
  return laneSum(lo, hi);
}

/// scoreGradsNarrow without AVX-512 (`path` Best or Avx2), in two passes;
/// also the AVX-512 path's tail.
static void scoreGradsThenNarrow(const float *p, float *ds, float di, int64_t n,
                                 BFloat16 *low, VectorPath path) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    ds[j] = p[j] * (ds[j] - di);
  convertToBFloat16(ds, low, n, path);
}

/// scoreGradsNarrow sixteen at a time (the same operations lane by lane).
__attribute__((target("avx512f"))) static void
scoreGradsNarrowAvx512(const float *p, float *ds, float di, int64_t n,
                       BFloat16 *low) {
  __m512 d = _mm512_set1_ps(di);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 g = _mm512_mul_ps(_mm512_loadu_ps(p + i),
                             _mm512_sub_ps(_mm512_loadu_ps(ds + i), d));
    _mm512_storeu_ps(ds + i, g);
    rt::detail::storeRoundedAvx512(g, low + i);
  }
  scoreGradsThenNarrow(p + i, ds + i, di, n - i, low + i, VectorPath::Best);
}

/// The maximum of row[0..n) (n > 0), sixteen lanes at a time.
__attribute__((target("avx512f,avx2,fma"))) static float
maxRowAvx512(const float *row, int64_t n) {
  __m512 acc = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    acc = _mm512_max_ps(acc, _mm512_loadu_ps(row + i));
  float result = _mm512_reduce_max_ps(acc);
  for (; i < n; ++i)
    result = std::max(result, row[i]);
  return result;
}

#pragma GCC diagnostic pop

/// The maximum of row[0..n) (n > 0) with AVX2; -inf entries count as any
/// other value. Maximum is exact, so the lane order does not matter.
__attribute__((target("avx2,fma"))) static float maxRowAvx2(const float *row,
                                                            int64_t n) {
  __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_max_ps(acc, _mm256_loadu_ps(row + i));
  alignas(32) float lane[8];
  _mm256_store_ps(lane, acc);
  float result = lane[0];
  for (int j = 1; j < 8; ++j)
    result = std::max(result, lane[j]);
  for (; i < n; ++i)
    result = std::max(result, row[i]);
  return result;
}

/// Portable fallback of expShiftedAvx2 (libm's expf).
static double expShiftedScalar(float *row, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    row[i] = std::exp(row[i] - shift);
    sum += row[i];
  }
  return sum;
}

/// Whether the AVX2 + FMA paths may run (checked once).
static bool hasAvx2() {
  static const bool result =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return result;
}

/// Whether the AVX-512 path may run too (checked once).
static bool hasAvx512() {
  static const bool result = hasAvx2() && __builtin_cpu_supports("avx512f");
  return result;
}

double expShifted(float *row, int64_t n, float shift) {
  if (hasAvx512())
    return expShiftedAvx512(row, n, shift);
  return hasAvx2() ? expShiftedAvx2(row, n, shift)
                   : expShiftedScalar(row, n, shift);
}

/// expShiftedNarrow without AVX-512 (`path` Best or Avx2): the
/// exponentials, then their rounding in a pass of its own (the same bits).
static double expShiftedThenNarrow(float *row, int64_t n, float shift,
                                   BFloat16 *low, VectorPath path) {
  double sum = path == VectorPath::Avx2 ? expShiftedAvx2(row, n, shift)
                                        : expShifted(row, n, shift);
  convertToBFloat16(row, low, n, path);
  return sum;
}

double expShiftedNarrow(float *row, int64_t n, float shift, sd_bf16 *low) {
  auto *out = reinterpret_cast<BFloat16 *>(low);
  if (hasAvx512())
    return expShiftedAvx512(row, n, shift, out);
  return expShiftedThenNarrow(row, n, shift, out, VectorPath::Best);
}

void scoreGradsNarrow(const float *p, float *ds, float di, int64_t n,
                      sd_bf16 *low) {
  auto *out = reinterpret_cast<BFloat16 *>(low);
  if (hasAvx512())
    scoreGradsNarrowAvx512(p, ds, di, n, out);
  else
    scoreGradsThenNarrow(p, ds, di, n, out, VectorPath::Best);
}

} // namespace detail

double expShiftedRow(float *row, int64_t n, float shift, sd_bf16 *low,
                     VectorPath path) {
  auto *out = reinterpret_cast<BFloat16 *>(low);
  switch (path) {
  case VectorPath::Best:
    break;
  case VectorPath::Avx2:
    return out ? detail::expShiftedThenNarrow(row, n, shift, out, path)
               : detail::expShiftedAvx2(row, n, shift);
  case VectorPath::Avx512:
    return detail::expShiftedAvx512(row, n, shift, out);
  }
  return out ? detail::expShiftedNarrow(row, n, shift, low)
             : detail::expShifted(row, n, shift);
}

void scoreGradsRow(const float *p, float *ds, float di, int64_t n, sd_bf16 *low,
                   VectorPath path) {
  if (path == VectorPath::Avx512)
    detail::scoreGradsNarrowAvx512(p, ds, di, n,
                                   reinterpret_cast<BFloat16 *>(low));
  else if (path == VectorPath::Best)
    detail::scoreGradsNarrow(p, ds, di, n, low);
  else
    detail::scoreGradsThenNarrow(p, ds, di, n,
                                 reinterpret_cast<BFloat16 *>(low), path);
}

namespace detail {

float maxRow(const float *row, int64_t n) {
  if (hasAvx512())
    return maxRowAvx512(row, n);
  if (hasAvx2())
    return maxRowAvx2(row, n);
  float result = row[0];
  for (int64_t i = 1; i < n; ++i)
    result = std::max(result, row[i]);
  return result;
}

/// Softmax of one contiguous row in place. A row of only -inf becomes NaN, as
/// in the reference (attention handles fully masked rows itself).
void softmaxRow(float *row, int64_t n) {
  if (n <= 0)
    return;
  float maxValue = maxRow(row, n);
  float inv = static_cast<float>(1.0 / expShifted(row, n, maxValue));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    row[i] *= inv;
}

} // namespace detail

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

/// Tile edge of the blocked 2-D transpose: a 32x32 f32 tile (4 KiB) of the
/// source and one of the destination stay in L1.
static constexpr int64_t kTile = 32;

/// out[iy*sy + ix] = in[ix*sx + iy] for an 8x8 block, in registers.
__attribute__((target("avx2,fma"))) static void
transpose8x8(const float *in, int64_t sx, float *out, int64_t sy) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i)
    r[i] = _mm256_loadu_ps(in + i * sx);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(out + i * sy,
                     _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(out + (i + 4) * sy,
                     _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

#if defined(__SSE2__)
/// out[iy*sy + ix] = in[ix*sx + iy] for an 8x8 block of 2-byte elements
/// (bf16 bits), in registers: SSE2, which every x86-64 CPU has. Moved one
/// at a time, the bf16 transposes of a UNet's 3x3x256x256 convolution
/// kernels took 11.1 ms a traced device-step against 7.4 in f32; alone on
/// one thread, 0.24 ms a call element by element and 0.13 in blocks (f32:
/// 0.43).
static void transpose8x8(const uint16_t *in, int64_t sx, uint16_t *out,
                         int64_t sy) {
  __m128i r[8], t[8];
  for (int i = 0; i < 8; ++i)
    r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i * sx));
  // Rows interleaved in pairs (t[i], t[i + 1]: columns 0-3 and 4-7 of rows
  // i and i + 1), then in fours (r: two columns of four rows each).
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm_unpacklo_epi16(r[i], r[i + 1]);
    t[i + 1] = _mm_unpackhi_epi16(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm_unpacklo_epi32(t[i], t[i + 2]);         // columns 0, 1
    r[i + 1] = _mm_unpackhi_epi32(t[i], t[i + 2]);     // columns 2, 3
    r[i + 2] = _mm_unpacklo_epi32(t[i + 1], t[i + 3]); // 4, 5
    r[i + 3] = _mm_unpackhi_epi32(t[i + 1], t[i + 3]); // 6, 7
  }
  // Column 2c of rows 0-3 and of rows 4-7, then column 2c + 1.
  for (int c = 0; c < 4; ++c) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + (2 * c) * sy),
                     _mm_unpacklo_epi64(r[c], r[c + 4]));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + (2 * c + 1) * sy),
                     _mm_unpackhi_epi64(r[c], r[c + 4]));
  }
}
#endif

/// One tile of the 2-D transpose: out[iy*sy + ix] = in[ix*sx + iy] for
/// iy in [y0, y1), ix in [x0, x1); 8x8 blocks in registers when possible
/// (f32 with AVX2, 2-byte elements with SSE2).
template <typename T>
static void transposeTile(const T *in, int64_t sx, T *out, int64_t sy,
                          int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                          bool avx2) {
#if defined(__SSE2__)
  constexpr bool kBits16Blocks = std::is_same_v<T, uint16_t>;
#else
  constexpr bool kBits16Blocks = false;
#endif
  int64_t yFull = y0, xFull = x0;
  if constexpr (std::is_same_v<T, float> || kBits16Blocks) {
    // f32 blocks need AVX2; SSE2 is in every x86-64 CPU.
    if (!std::is_same_v<T, float> || avx2) {
      yFull = y0 + (y1 - y0) / 8 * 8;
      xFull = x0 + (x1 - x0) / 8 * 8;
    }
    for (int64_t iy = y0; iy < yFull; iy += 8)
      for (int64_t ix = x0; ix < xFull; ix += 8)
        transpose8x8(in + ix * sx + iy, sx, out + iy * sy + ix, sy);
  }
  // The remainders: columns right of the blocks, then rows below them.
  for (int64_t iy = y0; iy < yFull; ++iy)
    for (int64_t ix = xFull; ix < x1; ++ix)
      out[iy * sy + ix] = in[ix * sx + iy];
  for (int64_t iy = yFull; iy < y1; ++iy)
    for (int64_t ix = x0; ix < x1; ++ix)
      out[iy * sy + ix] = in[ix * sx + iy];
}

/// transpose() on elements of type T (moved, never read as numbers).
template <typename T>
static void transposeElements(const T *in, T *out, int32_t rank,
                              const int64_t *inShape, const int64_t *perm) {
  // Drop size-1 dimensions and merge input dimensions that stay adjacent and
  // in order in the output: [B,H,S,D]->[B,H,D,S] stays rank 3 after merging
  // B and H, and a no-op permutation becomes a copy.
  int64_t total = 1;
  for (int32_t d = 0; d < rank; ++d)
    total *= inShape[d];
  if (total == 0)
    return;
  std::vector<int64_t> kept; // output order, input dimension numbers
  for (int32_t i = 0; i < rank; ++i)
    if (inShape[perm[i]] != 1)
      kept.push_back(perm[i]);
  // Input dimensions in input order, each with its position among `kept`.
  std::vector<int64_t> sorted(kept);
  std::sort(sorted.begin(), sorted.end());
  // Groups: maximal runs of `kept` that are consecutive in the input.
  std::vector<std::vector<int64_t>> groups; // output order
  for (int64_t d : kept) {
    if (!groups.empty()) {
      int64_t last = groups.back().back();
      auto it = std::find(sorted.begin(), sorted.end(), last);
      if (it + 1 != sorted.end() && *(it + 1) == d) {
        groups.back().push_back(d);
        continue;
      }
    }
    groups.push_back({d});
  }
  int64_t r = static_cast<int64_t>(groups.size());
  if (r <= 1) {
    std::memcpy(out, in, static_cast<size_t>(total) * sizeof(T));
    return;
  }
  // Coalesced shapes and strides. Group g (output position) has size
  // `size[g]`, input stride `inStride[g]`, output stride `outStride[g]`.
  std::vector<int64_t> size(r), inStride(r), outStride(r);
  std::vector<int64_t> inOrder(r); // groups in input order
  for (int64_t g = 0; g < r; ++g) {
    size[g] = 1;
    for (int64_t d : groups[g])
      size[g] *= inShape[d];
    inOrder[g] = g;
  }
  std::sort(inOrder.begin(), inOrder.end(), [&](int64_t x, int64_t y) {
    return groups[x].front() < groups[y].front();
  });
  int64_t stride = 1;
  for (int64_t j = r - 1; j >= 0; --j) {
    inStride[inOrder[j]] = stride;
    stride *= size[inOrder[j]];
  }
  stride = 1;
  for (int64_t g = r - 1; g >= 0; --g) {
    outStride[g] = stride;
    stride *= size[g];
  }
  // The output's innermost group `x` (contiguous in the output) and the group
  // `y` that is contiguous in the input. Every index of the remaining
  // ("outer") groups selects a 2-D block between them.
  int64_t x = r - 1, y = inOrder[r - 1];
  std::vector<int64_t> outer;
  for (int64_t g = 0; g < r; ++g)
    if (g != x && g != y)
      outer.push_back(g);
  int64_t numOuter = 1;
  for (int64_t g : outer)
    numOuter *= size[g];
  int64_t numOuterDims = static_cast<int64_t>(outer.size());
  // The input and output offsets of outer index `o`.
  auto outerBase = [&](int64_t o, int64_t &inBase, int64_t &outBase) {
    inBase = outBase = 0;
    for (int64_t j = numOuterDims - 1, rem = o; j >= 0; --j) {
      int64_t g = outer[j];
      int64_t idx = rem % size[g];
      rem /= size[g];
      inBase += idx * inStride[g];
      outBase += idx * outStride[g];
    }
  };
  if (x == y) {
    // The innermost dimension stays innermost: copy contiguous runs.
    size_t bytes = static_cast<size_t>(size[x]) * sizeof(T);
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < numOuter; ++o) {
      int64_t inBase, outBase;
      outerBase(o, inBase, outBase);
      std::memcpy(out + outBase, in + inBase, bytes);
    }
    return;
  }
  // A tiled 2-D transpose of every outer block.
  int64_t tilesX = (size[x] + kTile - 1) / kTile;
  int64_t tilesY = (size[y] + kTile - 1) / kTile;
  int64_t sx = inStride[x], sy = outStride[y];
  bool avx2 = detail::hasAvx2();
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < numOuter * tilesY * tilesX; ++item) {
    int64_t o = item / (tilesY * tilesX);
    int64_t ty = (item / tilesX) % tilesY, tx = item % tilesX;
    int64_t inBase, outBase;
    outerBase(o, inBase, outBase);
    int64_t y0 = ty * kTile, y1 = std::min(size[y], y0 + kTile);
    int64_t x0 = tx * kTile, x1 = std::min(size[x], x0 + kTile);
    transposeTile(in + inBase, sx, out + outBase, sy, y0, y1, x0, x1, avx2);
  }
}

void transpose(const void *in, void *out, int32_t rank, const int64_t *inShape,
               const int64_t *perm, int32_t elementBytes) {
  if (elementBytes == 2)
    transposeElements(static_cast<const uint16_t *>(in),
                      static_cast<uint16_t *>(out), rank, inShape, perm);
  else
    transposeElements(static_cast<const float *>(in), static_cast<float *>(out),
                      rank, inShape, perm);
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

void softmaxBF16(const sd_bf16 *in, sd_bf16 *out, int32_t rank,
                 const int64_t *shape, int32_t dim) {
  // As softmax's strided path, for every layout: each softmax widened into
  // its thread's row, computed, rounded back.
  int64_t outer = 1, size = shape[dim], inner = 1;
  for (int32_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int32_t d = dim + 1; d < rank; ++d)
    inner *= shape[d];
  if (outer * size * inner == 0)
    return;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(size));
#pragma omp for schedule(static)
    for (int64_t item = 0; item < outer * inner; ++item) {
      int64_t base = (item / inner) * size * inner + item % inner;
      // A contiguous softmax (attention's rows) converts on the vector
      // path.
      if (inner == 1) {
        convertToFloat(reinterpret_cast<const BFloat16 *>(in + base),
                       row.data(), size);
      } else {
        for (int64_t j = 0; j < size; ++j)
          row[j] = toFloat(BFloat16{in[base + j * inner].bits});
      }
      detail::softmaxRow(row.data(), size);
      if (inner == 1) {
        convertToBFloat16(row.data(), reinterpret_cast<BFloat16 *>(out + base),
                          size);
      } else {
        for (int64_t j = 0; j < size; ++j)
          out[base + j * inner].bits = toBFloat16(row[j]).bits;
      }
    }
  }
}

void softmax(const float *in, float *out, int32_t rank, const int64_t *shape,
             int32_t dim) {
  // [outer, size, inner]: the elements of one softmax are `inner` apart.
  int64_t outer = 1, size = shape[dim], inner = 1;
  for (int32_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int32_t d = dim + 1; d < rank; ++d)
    inner *= shape[d];
  if (outer * size * inner == 0)
    return;
  if (inner == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
      float *row = out + o * size;
      if (row != in + o * size)
        std::memcpy(row, in + o * size,
                    static_cast<size_t>(size) * sizeof(float));
      detail::softmaxRow(row, size);
    }
    return;
  }
  // Strided: gather each softmax into a per-thread contiguous row.
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(size));
#pragma omp for schedule(static)
    for (int64_t item = 0; item < outer * inner; ++item) {
      int64_t base = (item / inner) * size * inner + item % inner;
      for (int64_t j = 0; j < size; ++j)
        row[j] = in[base + j * inner];
      detail::softmaxRow(row.data(), size);
      for (int64_t j = 0; j < size; ++j)
        out[base + j * inner] = row[j];
    }
  }
}

//===----------------------------------------------------------------------===//
// Streaming
//===----------------------------------------------------------------------===//

void addScaled(const float *x, const float *y, float scale, float *out,
               int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] + scale * y[i];
}

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

void rng(bool normal, uint64_t seed, float *out, int32_t rank,
         const int64_t *shape, const int64_t *globalShape,
         const int64_t *offsets, double a, double b) {
  // Rows of the local block (its last dimension) are contiguous runs of
  // global indices.
  int64_t rows = 1, cols = rank > 0 ? shape[rank - 1] : 1;
  for (int32_t d = 0; d + 1 < rank; ++d)
    rows *= shape[d];
  if (rows * cols == 0)
    return;
  std::vector<int64_t> globalStride(static_cast<size_t>(rank));
  for (int64_t d = rank - 1, s = 1; d >= 0; --d) {
    globalStride[d] = s;
    s *= globalShape[d];
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t global = 0;
    for (int64_t d = rank - 2, rem = r; d >= 0; --d) {
      global += (rem % shape[d] + offsets[d]) * globalStride[d];
      rem /= shape[d];
    }
    if (rank > 0)
      global += offsets[rank - 1];
    float *dst = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      auto index = static_cast<uint64_t>(global + c);
      dst[c] = static_cast<float>(normal ? a + b * ref::normalAt(seed, index)
                                         : a + (b - a) *
                                                   ref::uniformAt(seed, index));
    }
  }
}

} // namespace sd::rt::kernels

bool sd::rt::hasVectorPath(VectorPath path) {
  switch (path) {
  case VectorPath::Best:
    return true;
  case VectorPath::Avx2:
    return kernels::detail::hasAvx2();
  case VectorPath::Avx512:
    return kernels::detail::hasAvx512();
  }
  return false;
}
