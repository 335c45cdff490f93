//===- Tensor.h - Value type of the reference evaluator ---------*- C++ -*-===//
//
// The reference evaluator is the numerical oracle of every sd test: a
// partitioned program run on N simulated devices must match the unpartitioned
// program run on one, and gradients must match finite differences. To keep the
// oracle obviously correct, a tensor is just a row-major array of `double`
// plus an element type tag: kernels always compute in double and the caller
// (the evaluator driver) rounds each result to its element type with
// `roundTo`, unless it runs the whole program in f64 mode.
//
// This library is plain C++17 and depends on neither LLVM nor MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SD_REFERENCE_TENSOR_H
#define SD_REFERENCE_TENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace sd::ref {

/// Element types the evaluator distinguishes. Only rounding behaviour depends
/// on them: values are always held as double.
enum class DType { F32, BF16, F64, I1 };

/// Short MLIR-like spelling ("f32", "bf16", "f64", "i1") for messages.
const char *dtypeName(DType t);

/// Rounds `v` to the nearest value representable in `t`:
/// - F32: `(double)(float)v` (round to nearest even, overflow to inf).
/// - BF16: round to nearest, ties to even, directly from double (no double
///   rounding through float); subnormals are kept, values beyond the largest
///   finite bfloat16 become +-inf, NaN stays NaN.
/// - F64: `v` unchanged.
/// - I1: 1 if `v != 0` (NaN counts as true, as a C++ bool conversion), else 0.
double roundTo(DType t, double v);

/// A dense row-major tensor of any rank (rank 0 is a scalar with one element).
/// A default-constructed tensor is *invalid* (no shape, no values); it stands
/// for "no value" and must not be passed to kernels.
class Tensor {
public:
  /// An invalid tensor; `isValid()` is false.
  Tensor() = default;
  /// A tensor of `shape` with every element equal to `fill`. The value is
  /// stored as given, not rounded to `dtype`. Note that a one-element braced
  /// list, `Tensor(shape, t, {v})`, selects this constructor, not the next.
  Tensor(std::vector<int64_t> shape, DType dtype, double fill = 0.0);
  /// A tensor of `shape` holding `values` in row-major order. The number of
  /// values must equal the product of `shape` (asserted).
  Tensor(std::vector<int64_t> shape, DType dtype, std::vector<double> values);

  /// A rank-0 tensor holding `v`.
  static Tensor scalar(double v, DType dtype = DType::F32);

  /// False only for a default-constructed tensor.
  bool isValid() const { return valid; }

  const std::vector<int64_t> &shape() const { return dims; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t dim(int64_t i) const;
  /// Product of the shape (1 for rank 0, 0 for an invalid tensor).
  int64_t numElements() const { return static_cast<int64_t>(data.size()); }

  DType dtype() const { return type; }
  /// Retags the element type without touching the values (see `convert` in
  /// Kernels.h for a conversion with semantics).
  void setDType(DType t) { type = t; }

  std::vector<double> &values() { return data; }
  const std::vector<double> &values() const { return data; }

  /// Element at row-major position `linear`.
  double &operator[](int64_t linear);
  double operator[](int64_t linear) const;
  /// Element at multi-index `index` (one entry per dimension).
  double at(const std::vector<int64_t> &index) const;
  double &at(const std::vector<int64_t> &index);

  /// Row-major strides in elements: the last dimension has stride 1.
  std::vector<int64_t> strides() const;

  /// Applies `roundTo(dtype(), v)` to every value.
  void roundToDType();

  /// E.g. `tensor<2x3xf32> [1, 2, 3, 4, 5, 6]`; at most `maxElements` values
  /// are printed, followed by "..." when there are more. Meant for test
  /// failure messages.
  std::string toString(int64_t maxElements = 16) const;

private:
  int64_t linearIndex(const std::vector<int64_t> &index) const;

  std::vector<int64_t> dims;
  std::vector<double> data;
  DType type = DType::F32;
  bool valid = false;
};

/// Product of the entries of `shape` (1 for an empty shape).
int64_t shapeProduct(const std::vector<int64_t> &shape);

/// Row-major strides of `shape`.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);

/// The largest elementwise relative difference of `actual` from `expected`:
///   max_i |actual_i - expected_i| / max(|expected_i|, absFloor).
/// `absFloor` keeps elements whose expected value is (near) zero from turning
/// round-off into a huge relative error: below it the measure is an absolute
/// difference scaled by 1/absFloor. Two NaNs, or two equal infinities, count
/// as equal (0); a NaN or infinity against anything else, or different shapes,
/// give +inf. Element types are ignored.
double maxRelativeDifference(const Tensor &actual, const Tensor &expected,
                             double absFloor = 1e-6);

/// max_i |actual_i - expected_i| with the same NaN/infinity/shape rules as
/// `maxRelativeDifference`.
double maxAbsoluteDifference(const Tensor &actual, const Tensor &expected);

} // namespace sd::ref

#endif // SD_REFERENCE_TENSOR_H
