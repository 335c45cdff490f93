//===- KernelsInternal.h - Index helpers shared by the kernels --*- C++ -*-===//
//
// Private to lib/Reference. Every layout kernel (transpose, broadcast, slice,
// dot_general, ...) boils down to "visit each index of some iteration space and
// read/write operands at linear offsets that are dot products of the index with
// per-operand strides". StridedWalker does exactly that, incrementally, so the
// kernels only describe strides instead of re-deriving index arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_REFERENCE_KERNELSINTERNAL_H
#define SD_LIB_REFERENCE_KERNELSINTERNAL_H

#include "sd/Reference/Tensor.h"

#include <cassert>
#include <cstdint>
#include <vector>

namespace sd::ref::detail {

/// Visits every multi-index of `shape` in row-major order (the last dimension
/// fastest) and maintains, for each operand k, the linear offset
///   base[k] + sum_d index[d] * strides[k][d].
/// A stride of 0 makes an operand ignore that dimension (broadcast or
/// reduction); a rank-0 shape is visited exactly once; a shape with a zero
/// dimension not at all.
class StridedWalker {
public:
  StridedWalker(std::vector<int64_t> iterationShape,
                std::vector<std::vector<int64_t>> operandStrides,
                std::vector<int64_t> base = {})
      : shape(std::move(iterationShape)), strides(std::move(operandStrides)),
        offsets(std::move(base)), index(shape.size(), 0) {
    if (offsets.empty())
      offsets.assign(strides.size(), 0);
    assert(offsets.size() == strides.size() && "one base per operand");
    for (const std::vector<int64_t> &s : strides) {
      (void)s;
      assert(s.size() == shape.size() && "one stride per dimension");
    }
    for (int64_t d : shape)
      if (d == 0)
        finished = true;
  }

  bool done() const { return finished; }
  int64_t offset(size_t operand) const { return offsets[operand]; }
  const std::vector<int64_t> &position() const { return index; }

  /// Advances to the next index (odometer increment), updating the offsets.
  void next() {
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < strides.size(); ++k)
        offsets[k] += strides[k][d];
      if (index[d] < shape[d])
        return;
      // Carry: rewind this dimension and move on to the next outer one.
      for (size_t k = 0; k < strides.size(); ++k)
        offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
    finished = true;
  }

private:
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides;
  std::vector<int64_t> offsets;
  std::vector<int64_t> index;
  bool finished = false;
};

/// True if `dims` holds distinct values in [0, rank).
inline bool areValidDims(const std::vector<int64_t> &dims, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d])
      return false;
    seen[d] = true;
  }
  return true;
}

} // namespace sd::ref::detail

#endif // SD_LIB_REFERENCE_KERNELSINTERNAL_H
