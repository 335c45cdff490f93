//===- KernelBuilder.h - fused kernels of the OpenMP lowering ---*- C++ -*-===//
//
// A fused kernel (a loop nest computing several ops at each point of its
// index space) is written by a KernelBuilder: it walks the kernel's ops from
// its root, asks each op (OpenMPLoweringOpInterface) at which positions it
// reads its operands and which scalar expression it computes, and writes
// the function. This header is the builder's side of that conversation:
// positions, the index algebra ops may use, and the result.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_KERNELBUILDER_H
#define SD_TARGET_OPENMP_KERNELBUILDER_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <string>

namespace mlir::sd::openmp {

//===----------------------------------------------------------------------===//
// Shapes and literals
//===----------------------------------------------------------------------===//

inline int64_t numElements(Type type) {
  return cast<RankedTensorType>(type).getNumElements();
}
inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
inline bool isPred(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isInteger(1);
}
/// Whether `v` is a bf16 tensor (stored as sd_bf16, computed in f32).
inline bool isBF16(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
}
/// The SdElementType (sd/Runtime/ProgramABI.h) of the buffer that stores a
/// value of `type`: f32 or bf16, and i1 stored as f32 0/1
/// (sd-lower-to-openmp admits no other element type).
inline StringRef abiElementType(Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  assert((element.isF32() || element.isBF16() || element.isInteger(1)) &&
         "sd-lower-to-openmp admits f32, bf16 and i1 tensors only");
  return element.isBF16() ? "SD_BF16" : "SD_F32";
}
/// The C type of one stored element of `type`: `float` or `sd_bf16`.
inline StringRef cElementType(Type type) {
  return cast<RankedTensorType>(type).getElementType().isBF16() ? "sd_bf16"
                                                                : "float";
}
/// The bytes of the buffer that stores a value of `type` (at least one
/// element, so that a scalar has storage).
inline int64_t bufferBytes(Type type) {
  int64_t size =
      cast<RankedTensorType>(type).getElementType().isBF16() ? 2 : 4;
  return size * std::max<int64_t>(numElements(type), 1);
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

//===----------------------------------------------------------------------===//
// What the interface speaks
//===----------------------------------------------------------------------===//

/// How sd-lower-to-openmp plans an op (OpenMPLoweringOpInterface).
enum class LoweringKind {
  /// Computed pointwise from its operands at the same position: fusible.
  Elementwise,
  /// Reads its operands at mapped positions (broadcast, reshape, slice,
  /// pad, ...): fusible, and recomputed rather than materialized when
  /// several kernels read it.
  IndexMap,
  /// Costs nothing to recompute (splat constants, iota): inlined wherever
  /// read.
  Cheap,
  /// Reduces its first operand; its producers fuse into its input loop.
  Reduction,
  /// A call into the BLAS or the runtime's kernels.
  Library,
  /// A collective (or a query of the device's mesh position).
  Collective,
  /// A static array in the program.
  Constant,
  /// A move between device and host memory.
  Memory,
};

/// An integer index: affine in the loop variables (`coef`, `k`), or an
/// opaque C++ expression.
struct Index {
  bool affine = true;
  SmallVector<int64_t> coef;
  int64_t k = 0;
  std::string expr;

  static Index constant(unsigned loops, int64_t k) {
    Index i;
    i.coef.assign(loops, 0);
    i.k = k;
    return i;
  }
  static Index opaque(std::string expr) {
    Index i;
    i.affine = false;
    i.expr = std::move(expr);
    return i;
  }
};

/// `a * scale + add`.
Index scaleAdd(const Index &a, int64_t scale, int64_t add);

/// Clamps the index expression `e` into [0, size): pad and concat read
/// their operands outside their bounds and discard the value.
Index clampIndex(const std::string &e, int64_t size);

/// Where a value is read: per dimension, or as a row-major offset.
struct Position {
  bool linear = false;
  Index offset;
  SmallVector<Index> dims;
};

/// An operand and where an op reads it.
struct OperandPosition {
  Value value;
  Position pos;
};

/// How a reduction combines its input.
struct ReductionInfo {
  /// The reduced dimensions of the first operand; all of them when
  /// `allDims`.
  SmallVector<int64_t> dims;
  bool allDims = false;
  /// Keeps the maximum (NaN wins) rather than the sum.
  bool max = false;
  /// Divides the sum by the number of values reduced into each output.
  bool mean = false;
};

/// A fused kernel's function and what it reads. The text does not name the
/// function: identical kernels (a transformer repeats them in every layer)
/// have identical `body` text.
struct KernelFunction {
  /// Comment lines: the kernel's name, kind, loop space and fused ops.
  std::string comment;
  /// From the parameter list to the closing brace; prefixed with
  /// `SD_LOCAL void NAME` to make the definition. It never names the
  /// function, so kernels with the same body are one function.
  std::string body;
  /// The buffers it reads, in parameter order (`in0`, `in1`, ...).
  SmallVector<Value> inputs;
  /// Per input, whether the kernel reads it only at the position it writes
  /// (so the output may overwrite it in place).
  SmallVector<bool> identityRead;
  /// The values it stores besides its root's result (`#sd_omp.kernel_output`
  /// ops), in parameter order after `out` (`out1`, `out2`, ...).
  SmallVector<Value> outputs;
};

//===----------------------------------------------------------------------===//
// KernelBuilder
//===----------------------------------------------------------------------===//

/// Writes the function of one planned kernel (a `fused` or `reduce` root
/// and the ops fused into it).
class KernelBuilder {
public:
  /// `fusedOps` names the kernel's ops for its comment; `outputs` are the
  /// values it stores besides its root's result, each of the root's shape.
  KernelBuilder(Operation *root, ArrayRef<std::string> fusedOps,
                ArrayRef<Value> outputs = {});

  /// Writes the kernel into `out`.
  LogicalResult build(KernelFunction &out);

  //===--------------------------------------------------------------------===//
  // For the ops' buildScalar and getOperandPositions
  //===--------------------------------------------------------------------===//

  /// The constant index `k`.
  Index constantIndex(int64_t k) const {
    return Index::constant(loopShape.size(), k);
  }
  /// `pos` per dimension of a value of `shape` (splitting a linear offset).
  SmallVector<Index> dimsOf(const Position &pos, ArrayRef<int64_t> shape);
  /// `pos` as a row-major offset into a value of `shape`.
  Index offsetOf(const Position &pos, ArrayRef<int64_t> shape);
  /// The C++ text of `i` in the loop variables.
  std::string print(const Index &i);
  /// Records that the code reads loop variables through `i`, which loop
  /// collapsing must preserve.
  void useIndex(const Index &i) {
    if (i.affine)
      affines.push_back(i);
    else
      hasOpaque = true;
  }
  /// Records that the code uses the loop variables in a non-affine way:
  /// the loops are not collapsed.
  void markOpaque() { hasOpaque = true; }
  /// Binds `expr` to a fresh `const float` (`bool` when `pred`) and returns
  /// its name.
  std::string bind(StringRef expr, bool pred = false);

private:
  struct Access {
    unsigned input;
    Index offset;
  };
  LogicalResult generate(bool collapse);
  void setupLoops();
  void collapseLoops();
  std::string gen(Value v, const Position &pos);
  std::string emitLeaf(Value v, const Position &pos);
  std::string key(Value v, const Position &pos);
  /// The digit (lin / st) % sz of the linear offset `lin`, simplified.
  Index digitOf(const Index &lin, int64_t st, int64_t sz);
  std::string fresh() { return "v" + std::to_string(nextVar++); }
  Index loopIndex(unsigned d) {
    Index i = constantIndex(0);
    i.coef[d] = 1;
    return i;
  }
  Position identityPosition() {
    Position p;
    for (unsigned d = 0; d < loopShape.size(); ++d)
      p.dims.push_back(loopIndex(d));
    return p;
  }
  bool computesInline(Value v);
  void writeLoops(llvm::raw_ostream &f, ArrayRef<int64_t> extents);
  void writeReduction(llvm::raw_ostream &f, ArrayRef<int64_t> extents,
                      const Index &outIndex);

  Operation *root;
  int64_t id;
  /// The fused ops, named, for the kernel's comment.
  ArrayRef<std::string> fusedOps;
  /// The extra outputs, and per generation the variables holding them.
  SmallVector<Value> outputs;
  SmallVector<std::string> outputResults;
  bool isReduction = false;
  ReductionInfo reduction;
  /// The index space and, per loop, whether it is reduced.
  SmallVector<int64_t> loopShape;
  SmallVector<bool> reduced;
  /// Collapsed loops: groups of consecutive loops, outermost first.
  SmallVector<SmallVector<unsigned>> groups;

  // Per generation.
  std::string body;
  std::string result;
  std::map<std::string, std::string> memo;
  SmallVector<Value> inputs;
  DenseMap<Value, unsigned> inputIndex;
  SmallVector<Access> accesses;
  /// bf16 inputs read through an opaque (gathered) offset and small enough
  /// to widen into an f32 array on the stack before the loops.
  SmallVector<unsigned> widenedInputs;
  SmallVector<Index> affines;
  bool hasOpaque = false;
  int64_t nextVar = 0;
};

/// Scalar helpers (vectorizable exp, tanh, erf, ...) every program defines
/// before its kernels.
extern const char *const kKernelHelpers;

} // namespace mlir::sd::openmp

#endif // SD_TARGET_OPENMP_KERNELBUILDER_H
