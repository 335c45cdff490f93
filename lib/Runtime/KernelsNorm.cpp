//===- KernelsNorm.cpp - Layer, RMS and group normalization ---------------===//
//
// Statistics are accumulated in double, two passes (mean, then the mean of
// squared deviations) as the reference does, so the f32 results agree with
// it to a few ulps whatever the row length. One row (or one sample's group)
// is owned by one thread, and `omp simd` reductions have a fixed lane order,
// so the summation order per output is fixed.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include <cmath>

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

void layerNorm(const float *in, const float *scale, const float *bias,
               float *out, int64_t rows, int64_t cols, double epsilon) {
  if (cols <= 0)
    return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in + r * cols;
    double mean = sumRow(x, cols) / static_cast<double>(cols);
    double var =
        sumSquaredDeviations(x, cols, mean) / static_cast<double>(cols);
    normalizeRow(x, scale, bias, out + r * cols, cols, mean,
                 1.0 / std::sqrt(var + epsilon));
  }
}

void rmsNorm(const float *in, const float *scale, float *out, int64_t rows,
             int64_t cols, double epsilon) {
  if (cols <= 0)
    return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in + r * cols;
    double meanSquare =
        sumSquaredDeviations(x, cols, 0.0) / static_cast<double>(cols);
    normalizeRow(x, scale, nullptr, out + r * cols, cols, 0.0,
                 1.0 / std::sqrt(meanSquare + epsilon));
  }
}

void groupNorm(const float *in, const float *scale, const float *bias,
               float *out, int64_t n, int64_t spatial, int64_t channels,
               int64_t groups, double epsilon) {
  if (groups <= 0 || channels <= 0 || spatial <= 0)
    return;
  int64_t perGroup = channels / groups;
  double count = static_cast<double>(spatial * perGroup);
  // One (sample, group) pair per iteration; its elements are `perGroup`
  // contiguous channels at each of `spatial` positions.
#pragma omp parallel for schedule(static)
  for (int64_t pair = 0; pair < n * groups; ++pair) {
    int64_t sample = pair / groups, g = pair % groups;
    const float *x = in + sample * spatial * channels + g * perGroup;
    float *y = out + sample * spatial * channels + g * perGroup;
    double sum = 0.0;
    for (int64_t p = 0; p < spatial; ++p)
      sum += sumRow(x + p * channels, perGroup);
    double mean = sum / count;
    double squares = 0.0;
    for (int64_t p = 0; p < spatial; ++p)
      squares += sumSquaredDeviations(x + p * channels, perGroup, mean);
    double invStd = 1.0 / std::sqrt(squares / count + epsilon);
    const float *s = scale ? scale + g * perGroup : nullptr;
    const float *b = bias ? bias + g * perGroup : nullptr;
    for (int64_t p = 0; p < spatial; ++p)
      normalizeRow(x + p * channels, s, b, y + p * channels, perGroup, mean,
                   invStd);
  }
}

} // namespace sd::rt::kernels
