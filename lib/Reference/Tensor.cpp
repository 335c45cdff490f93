//===- Tensor.cpp - Value type of the reference evaluator -----------------===//

#include "sd/Reference/Tensor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>

namespace sd::ref {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I1:
    return "i1";
  }
  return "?";
}

/// Rounds a finite double to bfloat16 (8 significant bits, exponent range of
/// f32) with round-to-nearest-even in one step, so there is no double rounding.
static double roundToBF16(double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0.0)
    return v;
  // v = m * 2^e with 0.5 <= |m| < 1: the leading bit has weight 2^(e-1), so
  // with 8 significant bits the last kept bit has weight 2^(e-8). Below the
  // smallest normal (2^-126) the quantum stays at the subnormal step 2^-133.
  int e = 0;
  std::frexp(v, &e);
  int quantumExp = std::max(e - 8, -133);
  // Scaling by a power of two is exact; std::nearbyint rounds half to even in
  // the default rounding mode.
  double q = std::nearbyint(std::ldexp(v, -quantumExp));
  double r = std::ldexp(q, quantumExp);
  // Largest finite bfloat16: (2^8 - 1) * 2^120. Anything that rounded beyond
  // it rounded to 2^128, which bfloat16 represents as infinity.
  const double maxFinite = std::ldexp(255.0, 120);
  if (std::fabs(r) > maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), v);
  return r;
}

double roundTo(DType t, double v) {
  switch (t) {
  case DType::F32:
    return static_cast<double>(static_cast<float>(v));
  case DType::BF16:
    return roundToBF16(v);
  case DType::F64:
    return v;
  case DType::I1:
    return v != 0.0 ? 1.0 : 0.0;
  }
  return v;
}

int64_t shapeProduct(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, double fill)
    : dims(std::move(shape)), type(dtype), valid(true) {
  for (int64_t d : dims) {
    (void)d;
    assert(d >= 0 && "negative dimension size");
  }
  data.assign(static_cast<size_t>(shapeProduct(dims)), fill);
}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype,
               std::vector<double> values)
    : dims(std::move(shape)), data(std::move(values)), type(dtype),
      valid(true) {
  assert(static_cast<int64_t>(data.size()) == shapeProduct(dims) &&
         "number of values does not match the shape");
}

Tensor Tensor::scalar(double v, DType dtype) { return Tensor({}, dtype, v); }

int64_t Tensor::dim(int64_t i) const {
  assert(i >= 0 && i < rank() && "dimension out of range");
  return dims[i];
}

double &Tensor::operator[](int64_t linear) {
  assert(linear >= 0 && linear < numElements() && "index out of range");
  return data[linear];
}

double Tensor::operator[](int64_t linear) const {
  assert(linear >= 0 && linear < numElements() && "index out of range");
  return data[linear];
}

int64_t Tensor::linearIndex(const std::vector<int64_t> &index) const {
  assert(static_cast<int64_t>(index.size()) == rank() && "index rank mismatch");
  int64_t linear = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    assert(index[i] >= 0 && index[i] < dims[i] && "index out of range");
    linear = linear * dims[i] + index[i];
  }
  return linear;
}

double Tensor::at(const std::vector<int64_t> &index) const {
  return data[linearIndex(index)];
}

double &Tensor::at(const std::vector<int64_t> &index) {
  return data[linearIndex(index)];
}

std::vector<int64_t> Tensor::strides() const { return rowMajorStrides(dims); }

void Tensor::roundToDType() {
  for (double &v : data)
    v = roundTo(type, v);
}

std::string Tensor::toString(int64_t maxElements) const {
  if (!valid)
    return "<invalid tensor>";
  std::ostringstream os;
  os.precision(9);
  os << "tensor<";
  for (int64_t d : dims)
    os << d << "x";
  os << dtypeName(type) << "> [";
  int64_t n = numElements();
  int64_t shown = std::min(n, std::max<int64_t>(maxElements, 0));
  for (int64_t i = 0; i < shown; ++i)
    os << (i ? ", " : "") << data[i];
  if (shown < n)
    os << (shown ? ", ..." : "...");
  os << "]";
  return os.str();
}

/// Compares one pair of elements; returns +inf for NaN/infinity mismatches,
/// 0 for matching special values, and otherwise `|a - b| / denominator(b)`.
template <typename Denominator>
static double elementDifference(double a, double b, Denominator denominator) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b)
               ? 0.0
               : std::numeric_limits<double>::infinity();
  if (std::isinf(a) || std::isinf(b))
    return a == b ? 0.0 : std::numeric_limits<double>::infinity();
  return std::fabs(a - b) / denominator(b);
}

template <typename Denominator>
static double maxDifference(const Tensor &actual, const Tensor &expected,
                            Denominator denominator) {
  if (actual.isValid() != expected.isValid() ||
      actual.shape() != expected.shape())
    return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (int64_t i = 0, e = actual.numElements(); i < e; ++i)
    worst =
        std::max(worst, elementDifference(actual[i], expected[i], denominator));
  return worst;
}

double maxRelativeDifference(const Tensor &actual, const Tensor &expected,
                             double absFloor) {
  return maxDifference(actual, expected, [absFloor](double b) {
    return std::max(std::fabs(b), absFloor);
  });
}

double maxAbsoluteDifference(const Tensor &actual, const Tensor &expected) {
  return maxDifference(actual, expected, [](double) { return 1.0; });
}

} // namespace sd::ref
