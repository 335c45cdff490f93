//===- KernelsShape.cpp - Reductions and layout reference kernels ---------===//
//
// Reduce, broadcast_in_dim, reshape, transpose, slice, concatenate, pad and
// nearest upsampling. Each is expressed as a walk over an iteration space with
// per-operand strides (see StridedWalker), so the only thing a kernel decides
// is which stride each dimension has.
//
//===----------------------------------------------------------------------===//

#include "KernelsInternal.h"
#include "sd/Reference/Kernels.h"

#include <cassert>
#include <limits>

namespace sd::ref {

using detail::areValidDims;
using detail::StridedWalker;

Tensor reduce(ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &dims) {
  assert(areValidDims(dims, x.rank()) && "bad reduction dimensions");
  std::vector<bool> isReduced(x.rank(), false);
  for (int64_t d : dims)
    isReduced[d] = true;

  std::vector<int64_t> resultShape;
  int64_t count = 1; // Elements folded into each result element.
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (isReduced[d])
      count *= x.dim(d);
    else
      resultShape.push_back(x.dim(d));
  }

  double init = 0.0;
  if (kind == ReduceKind::Max)
    init = -std::numeric_limits<double>::infinity();
  else if (kind == ReduceKind::Min)
    init = std::numeric_limits<double>::infinity();
  Tensor result(resultShape, x.dtype(), init);

  // Walk the operand in order; its result element is found through strides
  // that are 0 along reduced dimensions.
  std::vector<int64_t> resultStrides = result.strides();
  std::vector<int64_t> toResult(x.rank(), 0);
  for (int64_t d = 0, r = 0; d < x.rank(); ++d)
    if (!isReduced[d])
      toResult[d] = resultStrides[r++];

  StridedWalker walk(x.shape(), {toResult});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i) {
    double &acc = result[walk.offset(0)];
    switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      acc += x[i];
      break;
    case ReduceKind::Max:
      acc = applyBinary(BinaryKind::Max, acc, x[i]);
      break;
    case ReduceKind::Min:
      acc = applyBinary(BinaryKind::Min, acc, x[i]);
      break;
    }
  }
  if (kind == ReduceKind::Mean)
    for (double &v : result.values())
      v /= static_cast<double>(count);
  return result;
}

Tensor broadcastInDim(const Tensor &x, const std::vector<int64_t> &resultShape,
                      const std::vector<int64_t> &broadcastDims) {
  assert(static_cast<int64_t>(broadcastDims.size()) == x.rank() &&
         "one broadcast dimension per operand dimension");
  assert(
      areValidDims(broadcastDims, static_cast<int64_t>(resultShape.size())) &&
      "bad broadcast dimensions");
  std::vector<int64_t> operandStrides = x.strides();
  // New result dimensions and size-1 operand dimensions repeat: stride 0.
  std::vector<int64_t> fromOperand(resultShape.size(), 0);
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t d = broadcastDims[i];
    assert((x.dim(i) == resultShape[d] || x.dim(i) == 1) &&
           "operand dimension neither matches nor is 1");
    fromOperand[d] = x.dim(i) == 1 ? 0 : operandStrides[i];
  }
  Tensor result(resultShape, x.dtype());
  StridedWalker walk(resultShape, {fromOperand});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i)
    result[i] = x[walk.offset(0)];
  return result;
}

Tensor reshape(const Tensor &x, const std::vector<int64_t> &shape) {
  assert(shapeProduct(shape) == x.numElements() &&
         "reshape changes the number of elements");
  return Tensor(shape, x.dtype(), x.values());
}

Tensor transpose(const Tensor &x, const std::vector<int64_t> &permutation) {
  assert(static_cast<int64_t>(permutation.size()) == x.rank() &&
         areValidDims(permutation, x.rank()) && "not a permutation");
  std::vector<int64_t> operandStrides = x.strides();
  std::vector<int64_t> resultShape(x.rank()), fromOperand(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    resultShape[i] = x.dim(permutation[i]);
    fromOperand[i] = operandStrides[permutation[i]];
  }
  Tensor result(resultShape, x.dtype());
  StridedWalker walk(resultShape, {fromOperand});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i)
    result[i] = x[walk.offset(0)];
  return result;
}

Tensor slice(const Tensor &x, const std::vector<int64_t> &start,
             const std::vector<int64_t> &limit,
             const std::vector<int64_t> &strides) {
  int64_t rank = x.rank();
  assert(static_cast<int64_t>(start.size()) == rank &&
         static_cast<int64_t>(limit.size()) == rank &&
         static_cast<int64_t>(strides.size()) == rank && "slice rank mismatch");
  std::vector<int64_t> operandStrides = x.strides();
  std::vector<int64_t> resultShape(rank), fromOperand(rank);
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    assert(0 <= start[d] && start[d] <= limit[d] && limit[d] <= x.dim(d) &&
           strides[d] > 0 && "slice bounds out of range");
    resultShape[d] = (limit[d] - start[d] + strides[d] - 1) / strides[d];
    fromOperand[d] = operandStrides[d] * strides[d];
    base += start[d] * operandStrides[d];
  }
  Tensor result(resultShape, x.dtype());
  StridedWalker walk(resultShape, {fromOperand}, {base});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i)
    result[i] = x[walk.offset(0)];
  return result;
}

Tensor concat(const std::vector<const Tensor *> &inputs, int64_t dim) {
  assert(!inputs.empty() && "concat needs an input");
  const Tensor &first = *inputs.front();
  assert(dim >= 0 && dim < first.rank() && "concat dimension out of range");
  std::vector<int64_t> resultShape = first.shape();
  resultShape[dim] = 0;
  for (const Tensor *input : inputs) {
    assert(input->rank() == first.rank() && "concat rank mismatch");
    resultShape[dim] += input->dim(dim);
  }
  Tensor result(resultShape, first.dtype());
  std::vector<int64_t> resultStrides = result.strides();

  // Each input is copied into the result at its running offset along `dim`.
  int64_t position = 0;
  for (const Tensor *input : inputs) {
    StridedWalker walk(input->shape(), {resultStrides},
                       {position * resultStrides[dim]});
    for (int64_t i = 0; !walk.done(); walk.next(), ++i)
      result[walk.offset(0)] = (*input)[i];
    position += input->dim(dim);
  }
  return result;
}

Tensor pad(const Tensor &x, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, double value) {
  int64_t rank = x.rank();
  assert(static_cast<int64_t>(low.size()) == rank &&
         static_cast<int64_t>(high.size()) == rank && "pad rank mismatch");
  std::vector<int64_t> resultShape(rank);
  for (int64_t d = 0; d < rank; ++d) {
    resultShape[d] = low[d] + x.dim(d) + high[d];
    assert(resultShape[d] >= 0 && "padding removes more than the dimension");
  }
  Tensor result(resultShape, x.dtype(), value);
  std::vector<int64_t> resultStrides = result.strides();
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d)
    base += low[d] * resultStrides[d];

  // Operand element `index` lands at `low + index`, unless negative padding
  // cut it off.
  StridedWalker walk(x.shape(), {resultStrides}, {base});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i) {
    bool inside = true;
    for (int64_t d = 0; d < rank && inside; ++d) {
      int64_t r = low[d] + walk.position()[d];
      inside = r >= 0 && r < resultShape[d];
    }
    if (inside)
      result[walk.offset(0)] = x[i];
  }
  return result;
}

Tensor upsampleNearest(const Tensor &x, int64_t scaleH, int64_t scaleW) {
  assert(x.rank() == 4 && scaleH > 0 && scaleW > 0 && "expected NHWC input");
  int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  Tensor result({n, h * scaleH, w * scaleW, c}, x.dtype());
  // The row-major result [N, H*sh, W*sw, C] is the row-major 6-D array
  // [N, H, sh, W, sw, C]; walking that, the operand ignores the sh and sw
  // dimensions (stride 0), which is exactly nearest-neighbour repetition.
  std::vector<int64_t> s = x.strides();
  StridedWalker walk({n, h, scaleH, w, scaleW, c},
                     {{s[0], s[1], 0, s[2], 0, s[3]}});
  for (int64_t i = 0; !walk.done(); walk.next(), ++i)
    result[i] = x[walk.offset(0)];
  return result;
}

} // namespace sd::ref
