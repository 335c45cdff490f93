//===- OpenMPKernel.h - fused kernels of the OpenMP lowering ----*- C++ -*-===//
//
// Private to lib/Passes: the loop-nest functions of fused kernels
// (OpenMPKernel.cpp) and the small helpers the emitter shares with them.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_PASSES_OPENMPKERNEL_H
#define SD_LIB_PASSES_OPENMPKERNEL_H

#include "sd/Passes/OpenMPEmitter.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <string>

namespace mlir::sd::openmp {

inline int64_t numElements(Type type) {
  return cast<RankedTensorType>(type).getNumElements();
}
inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
inline bool isPred(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isInteger(1);
}
inline SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}
inline int64_t product(ArrayRef<int64_t> values) {
  int64_t p = 1;
  for (int64_t v : values)
    p *= v;
  return p;
}

/// A float literal that reads back as exactly `value` (as an f32).
inline std::string floatLiteral(double value) {
  float f = static_cast<float>(value);
  if (std::isnan(f))
    return "NAN";
  if (std::isinf(f))
    return f > 0 ? "INFINITY" : "(-INFINITY)";
  return "(" + llvm::formatv("{0:e9}", f).str() + "f)";
}

/// "1, 2, 3".
inline std::string intList(ArrayRef<int64_t> values) {
  std::string s;
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  return s;
}

/// A fused kernel's function and what it reads.
struct KernelFunction {
  std::string text;
  /// The buffers it reads, in parameter order (`in0`, `in1`, ...).
  SmallVector<Value> inputs;
  /// Per input, whether the kernel reads it only at the position it writes
  /// (so the output may overwrite it in place).
  SmallVector<bool> identityRead;
};

/// Writes the function of the kernel rooted at `root` (a `fused` or
/// `reduce` root of sd-lower-to-openmp's plan), named after its
/// `sd.kernel`, with `fusedOps` in its comment.
LogicalResult emitKernelFunction(Operation *root, ArrayRef<std::string> fusedOps,
                                 KernelFunction &out);

/// Scalar helpers (vectorizable exp, tanh, erf, ...) every program defines
/// before its kernels.
extern const char *const kKernelHelpers;

} // namespace mlir::sd::openmp

#endif // SD_LIB_PASSES_OPENMPKERNEL_H
