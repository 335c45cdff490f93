//===- KernelsNorm.cpp - Normalization and softmax reference kernels ------===//
//
// Statistics are computed in two passes (mean first, then the mean of squared
// deviations), which is the numerically safe textbook form.
//
//===----------------------------------------------------------------------===//

#include "KernelsInternal.h"
#include "sd/Reference/Kernels.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sd::ref {

/// True if `p` is null or a rank-1 tensor of `size` elements.
[[maybe_unused]] static bool isChannelVector(const Tensor *p, int64_t size) {
  return !p || (p->rank() == 1 && p->dim(0) == size);
}

Tensor layerNorm(const Tensor &x, const Tensor *scale, const Tensor *bias,
                 double eps) {
  assert(x.rank() >= 1 && "layer norm needs a last dimension");
  int64_t c = x.dim(x.rank() - 1);
  assert(isChannelVector(scale, c) && isChannelVector(bias, c) &&
         "scale/bias must be [C]");
  int64_t rows = c == 0 ? 0 : x.numElements() / c;
  Tensor result(x.shape(), x.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    const double *in = x.values().data() + r * c;
    double *out = result.values().data() + r * c;
    double mean = 0.0;
    for (int64_t i = 0; i < c; ++i)
      mean += in[i];
    mean /= static_cast<double>(c);
    double var = 0.0;
    for (int64_t i = 0; i < c; ++i)
      var += (in[i] - mean) * (in[i] - mean);
    var /= static_cast<double>(c);
    double invStd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i)
      out[i] = (in[i] - mean) * invStd * (scale ? (*scale)[i] : 1.0) +
               (bias ? (*bias)[i] : 0.0);
  }
  return result;
}

Tensor rmsNorm(const Tensor &x, const Tensor *scale, double eps) {
  assert(x.rank() >= 1 && "rms norm needs a last dimension");
  int64_t c = x.dim(x.rank() - 1);
  assert(isChannelVector(scale, c) && "scale must be [C]");
  int64_t rows = c == 0 ? 0 : x.numElements() / c;
  Tensor result(x.shape(), x.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    const double *in = x.values().data() + r * c;
    double *out = result.values().data() + r * c;
    double meanSquare = 0.0;
    for (int64_t i = 0; i < c; ++i)
      meanSquare += in[i] * in[i];
    meanSquare /= static_cast<double>(c);
    double invRms = 1.0 / std::sqrt(meanSquare + eps);
    for (int64_t i = 0; i < c; ++i)
      out[i] = in[i] * invRms * (scale ? (*scale)[i] : 1.0);
  }
  return result;
}

Tensor groupNorm(const Tensor &x, const Tensor *scale, const Tensor *bias,
                 int64_t groups, double eps) {
  assert(x.rank() >= 2 && "group norm expects [N, ..., C]");
  int64_t n = x.dim(0), c = x.dim(x.rank() - 1);
  assert(groups > 0 && c % groups == 0 && "channels do not split into groups");
  assert(isChannelVector(scale, c) && isChannelVector(bias, c) &&
         "scale/bias must be [C]");
  // Positions per sample (everything between the batch and channel dims).
  int64_t positions = n * c == 0 ? 0 : x.numElements() / (n * c);
  int64_t perGroup = c / groups;
  double count = static_cast<double>(positions * perGroup);
  Tensor result(x.shape(), x.dtype());
  const std::vector<double> &in = x.values();

  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t g = 0; g < groups; ++g) {
      // Element (position p, channel g * perGroup + j) of sample ni.
      auto index = [&](int64_t p, int64_t j) {
        return (ni * positions + p) * c + g * perGroup + j;
      };
      double mean = 0.0;
      for (int64_t p = 0; p < positions; ++p)
        for (int64_t j = 0; j < perGroup; ++j)
          mean += in[index(p, j)];
      mean /= count;
      double var = 0.0;
      for (int64_t p = 0; p < positions; ++p)
        for (int64_t j = 0; j < perGroup; ++j)
          var += (in[index(p, j)] - mean) * (in[index(p, j)] - mean);
      var /= count;
      double invStd = 1.0 / std::sqrt(var + eps);
      for (int64_t p = 0; p < positions; ++p)
        for (int64_t j = 0; j < perGroup; ++j) {
          int64_t ch = g * perGroup + j;
          result[index(p, j)] =
              (in[index(p, j)] - mean) * invStd * (scale ? (*scale)[ch] : 1.0) +
              (bias ? (*bias)[ch] : 0.0);
        }
    }
  return result;
}

Tensor softmax(const Tensor &x, int64_t dim) {
  assert(dim >= 0 && dim < x.rank() && "softmax dimension out of range");
  // View x as [outer, size, inner]: elements of one softmax are `inner` apart.
  int64_t size = x.dim(dim);
  int64_t inner = x.strides()[dim];
  int64_t outer = size * inner == 0 ? 0 : x.numElements() / (size * inner);
  Tensor result(x.shape(), x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * size * inner + i;
      double maxValue = x[base];
      for (int64_t j = 1; j < size; ++j)
        maxValue = std::max(maxValue, x[base + j * inner]);
      double denom = 0.0;
      for (int64_t j = 0; j < size; ++j) {
        double e = std::exp(x[base + j * inner] - maxValue);
        result[base + j * inner] = e;
        denom += e;
      }
      for (int64_t j = 0; j < size; ++j)
        result[base + j * inner] /= denom;
    }
  return result;
}

} // namespace sd::ref
