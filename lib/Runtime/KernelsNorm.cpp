//===- KernelsNorm.cpp - Layer, RMS and group normalization ---------------===//
//
// Statistics are accumulated in double, two passes (mean, then the mean of
// squared deviations) as the reference does, so the f32 results agree with
// it to a few ulps whatever the row length. One row (or one sample's group)
// is owned by one thread, and `omp simd` reductions have a fixed lane order,
// so the summation order per output is fixed. The bf16 variants widen each
// row (group norm: each sample's group) into a buffer of its thread and run
// the same code, so their results are the f32 kernels' on the widened
// tensors, rounded.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "sd/Runtime/BFloat16.h"

#include <cmath>
#include <vector>

namespace sd::rt::kernels {

/// Sum of row[0..n) in double.
static double sumRow(const float *row, int64_t n) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(row[i]);
  return sum;
}

/// Sum of (row[i] - mean)^2 in double.
static double sumSquaredDeviations(const float *row, int64_t n, double mean) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    double d = static_cast<double>(row[i]) - mean;
    sum += d * d;
  }
  return sum;
}

/// out[i] = (in[i] - mean) * invStd * scale[i] + bias[i] for one row, the
/// statistics in double and the rest in float. The mean is split into a
/// float and a float remainder: `in[i] - m` is exact for inputs near the mean
/// (Sterbenz), so values far from zero keep the centered part accurate.
static void normalizeRow(const float *in, const float *scale, const float *bias,
                         float *out, int64_t n, double mean, double invStd) {
  float mHi = static_cast<float>(mean);
  float mLo = static_cast<float>(mean - static_cast<double>(mHi));
  float s = static_cast<float>(invStd);
  if (scale && bias) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = ((in[i] - mHi) - mLo) * s * scale[i] + bias[i];
  } else if (scale) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = ((in[i] - mHi) - mLo) * s * scale[i];
  } else if (bias) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = ((in[i] - mHi) - mLo) * s + bias[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = ((in[i] - mHi) - mLo) * s;
  }
}

/// One row of layer norm (or, with `centered` false, of RMS norm).
static void normRow(const float *x, const float *scale, const float *bias,
                    float *y, int64_t cols, double epsilon, bool centered) {
  double n = static_cast<double>(cols);
  if (!centered) {
    double meanSquare = sumSquaredDeviations(x, cols, 0.0) / n;
    normalizeRow(x, scale, nullptr, y, cols, 0.0,
                 1.0 / std::sqrt(meanSquare + epsilon));
    return;
  }
  double mean = sumRow(x, cols) / n;
  double var = sumSquaredDeviations(x, cols, mean) / n;
  normalizeRow(x, scale, bias, y, cols, mean, 1.0 / std::sqrt(var + epsilon));
}

/// `count` bf16 values widened into `out` (empty for null `in`).
static std::vector<float> widened(const sd_bf16 *in, int64_t count) {
  std::vector<float> out;
  if (!in)
    return out;
  out.resize(static_cast<size_t>(count));
  convertToFloat(reinterpret_cast<const BFloat16 *>(in), out.data(), count);
  return out;
}

/// Below a vector of channels (a UNet's 32 groups of 64 to 256 channels
/// hold 2 to 8), a group's row is converted element by element inline: a
/// call per row of convertToFloat or convertToBFloat16 cost more than the
/// normalization (group_norm_bf16 ran 2-2.6x slower than group_norm on
/// [4, 1024, 64] to [4, 256, 256] with 32 groups). The bits are the same.
static constexpr int64_t kShortRow = 32;

static void widenRow(const sd_bf16 *in, float *out, int64_t count) {
  if (count >= kShortRow) {
    convertToFloat(reinterpret_cast<const BFloat16 *>(in), out, count);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    out[i] = toFloat(BFloat16{in[i].bits});
}

static void narrowRow(const float *in, sd_bf16 *out, int64_t count) {
  if (count >= kShortRow) {
    convertToBFloat16(in, reinterpret_cast<BFloat16 *>(out), count);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    out[i] = sd_bf16{toBFloat16(in[i]).bits};
}

/// normRow over bf16 rows: each widened into its thread's buffer, the
/// result rounded.
static void normBF16(const sd_bf16 *in, const sd_bf16 *scale,
                     const sd_bf16 *bias, sd_bf16 *out, int64_t rows,
                     int64_t cols, double epsilon, bool centered) {
  if (cols <= 0)
    return;
  std::vector<float> s = widened(scale, cols), b = widened(bias, cols);
  const float *sp = scale ? s.data() : nullptr;
  const float *bp = bias ? b.data() : nullptr;
#pragma omp parallel
  {
    std::vector<float> x(static_cast<size_t>(cols)), y(x.size());
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      convertToFloat(reinterpret_cast<const BFloat16 *>(in + r * cols),
                     x.data(), cols);
      normRow(x.data(), sp, bp, y.data(), cols, epsilon, centered);
      convertToBFloat16(y.data(), reinterpret_cast<BFloat16 *>(out + r * cols),
                        cols);
    }
  }
}

void layerNormBF16(const sd_bf16 *in, const sd_bf16 *scale, const sd_bf16 *bias,
                   sd_bf16 *out, int64_t rows, int64_t cols, double epsilon) {
  normBF16(in, scale, bias, out, rows, cols, epsilon, /*centered=*/true);
}

void rmsNormBF16(const sd_bf16 *in, const sd_bf16 *scale, sd_bf16 *out,
                 int64_t rows, int64_t cols, double epsilon) {
  normBF16(in, scale, nullptr, out, rows, cols, epsilon, /*centered=*/false);
}

void layerNorm(const float *in, const float *scale, const float *bias,
               float *out, int64_t rows, int64_t cols, double epsilon) {
  if (cols <= 0)
    return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    normRow(in + r * cols, scale, bias, out + r * cols, cols, epsilon,
            /*centered=*/true);
}

void rmsNorm(const float *in, const float *scale, float *out, int64_t rows,
             int64_t cols, double epsilon) {
  if (cols <= 0)
    return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    normRow(in + r * cols, scale, nullptr, out + r * cols, cols, epsilon,
            /*centered=*/false);
}

/// One (sample, group) pair of group norm: `spatial` rows of `perGroup`
/// channels, row r at x + r * xStride (and y + r * yStride).
static void groupNormPair(const float *x, int64_t xStride, const float *scale,
                          const float *bias, float *y, int64_t yStride,
                          int64_t spatial, int64_t perGroup, double epsilon) {
  double count = static_cast<double>(spatial * perGroup);
  double sum = 0.0;
  for (int64_t p = 0; p < spatial; ++p)
    sum += sumRow(x + p * xStride, perGroup);
  double mean = sum / count;
  double squares = 0.0;
  for (int64_t p = 0; p < spatial; ++p)
    squares += sumSquaredDeviations(x + p * xStride, perGroup, mean);
  double invStd = 1.0 / std::sqrt(squares / count + epsilon);
  for (int64_t p = 0; p < spatial; ++p)
    normalizeRow(x + p * xStride, scale, bias, y + p * yStride, perGroup, mean,
                 invStd);
}

void groupNorm(const float *in, const float *scale, const float *bias,
               float *out, int64_t n, int64_t spatial, int64_t channels,
               int64_t groups, double epsilon) {
  if (groups <= 0 || channels <= 0 || spatial <= 0)
    return;
  int64_t perGroup = channels / groups;
  // One (sample, group) pair per iteration; its elements are `perGroup`
  // contiguous channels at each of `spatial` positions.
#pragma omp parallel for schedule(static)
  for (int64_t pair = 0; pair < n * groups; ++pair) {
    int64_t sample = pair / groups, g = pair % groups;
    int64_t offset = sample * spatial * channels + g * perGroup;
    groupNormPair(in + offset, channels, scale ? scale + g * perGroup : nullptr,
                  bias ? bias + g * perGroup : nullptr, out + offset, channels,
                  spatial, perGroup, epsilon);
  }
}

void groupNormBF16(const sd_bf16 *in, const sd_bf16 *scale, const sd_bf16 *bias,
                   sd_bf16 *out, int64_t n, int64_t spatial, int64_t channels,
                   int64_t groups, double epsilon) {
  if (groups <= 0 || channels <= 0 || spatial <= 0)
    return;
  int64_t perGroup = channels / groups;
  std::vector<float> s = widened(scale, channels), b = widened(bias, channels);
  // Each pair's elements widened into its thread's buffer, packed row after
  // row, normalized by the f32 code in the same order, and rounded back.
#pragma omp parallel
  {
    std::vector<float> x(static_cast<size_t>(spatial * perGroup)), y(x.size());
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < n * groups; ++pair) {
      int64_t sample = pair / groups, g = pair % groups;
      int64_t offset = sample * spatial * channels + g * perGroup;
      for (int64_t p = 0; p < spatial; ++p)
        widenRow(in + offset + p * channels, x.data() + p * perGroup, perGroup);
      groupNormPair(x.data(), perGroup,
                    scale ? s.data() + g * perGroup : nullptr,
                    bias ? b.data() + g * perGroup : nullptr, y.data(),
                    perGroup, spatial, perGroup, epsilon);
      for (int64_t p = 0; p < spatial; ++p)
        narrowRow(y.data() + p * perGroup, out + offset + p * channels,
                  perGroup);
    }
  }
}

} // namespace sd::rt::kernels
