//===- VjpEmitter.h - the vocabulary of the VJPs ----------------*- C++ -*-===//
//
// Shared by VjpModels.cpp and LayerVjpModels.cpp, which implement
// VjpOpInterface as external models: `Emitter` builds sd ops at one
// insertion point, `buildWith`, `unaryVjp` and `binaryVjp` give every VJP
// its result cotangent and its operand cotangents, and `VjpModel` forwards
// the interface to a function. Private to lib/Autodiff.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_AUTODIFF_VJPEMITTER_H
#define SD_LIB_AUTODIFF_VJPEMITTER_H

#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::sd::vjp {

using Cotangents = SmallVectorImpl<Value>;

inline RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `[0, n)`.
inline SmallVector<int64_t> iota(int64_t n) {
  return llvm::to_vector(llvm::seq<int64_t>(0, n));
}

/// The dimensions of `[0, rank)` not in `dims`, ascending.
inline SmallVector<int64_t> complement(int64_t rank, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      rest.push_back(d);
  return rest;
}

/// Builds sd ops at one insertion point and location. Shape helpers return
/// their operand unchanged where the op would be the identity.
struct Emitter {
  OpBuilder &b;
  Location loc;

  /// A tensor of `type` with every element `value`: a splat constant, or
  /// for a dynamic (batch) type a scalar broadcast to it, which
  /// sd-specialize-batch sizes.
  Value splat(RankedTensorType type, double value) {
    auto scalarType = type.hasStaticShape()
                          ? type
                          : RankedTensorType::get({}, type.getElementType());
    auto element = FloatAttr::get(type.getElementType(), value);
    Value constant = ConstantOp::create(
        b, loc, scalarType,
        DenseElementsAttr::get(scalarType, {Attribute(element)}));
    if (type.hasStaticShape())
      return constant;
    return BroadcastInDimOp::create(b, loc, type, constant,
                                    ArrayRef<int64_t>{});
  }
  Value splatLike(Value like, double value) {
    return splat(typeOf(like), value);
  }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  /// `x · factor`.
  Value scale(Value x, double factor) { return mul(x, splatLike(x, factor)); }
  /// `c − x`.
  Value rsub(double c, Value x) { return sub(splatLike(x, c), x); }
  Value compare(CompareDirection direction, Value x, Value y) {
    return CompareOp::create(b, loc, direction, x, y);
  }
  Value select(Value pred, Value onTrue, Value onFalse) {
    return SelectOp::create(b, loc, pred, onTrue, onFalse);
  }
  /// `x` with element type `elementType`.
  Value convert(Value x, Type elementType) {
    auto type = typeOf(x);
    if (type.getElementType() == elementType)
      return x;
    return ConvertOp::create(b, loc, type.clone(elementType), x);
  }

  Value reduceSum(Value x, ArrayRef<int64_t> dims) {
    if (dims.empty())
      return x;
    return ReduceSumOp::create(b, loc, x, dims);
  }
  Value broadcast(Value x, RankedTensorType type, ArrayRef<int64_t> dims) {
    if (typeOf(x) == type)
      return x;
    return BroadcastInDimOp::create(b, loc, type, x, dims);
  }
  /// `reduced`, the result of a reduction over `dims`, broadcast back to
  /// `full` (whose element type it keeps).
  Value expand(Value reduced, RankedTensorType full, ArrayRef<int64_t> dims) {
    return broadcast(reduced, full.clone(typeOf(reduced).getElementType()),
                     complement(full.getRank(), dims));
  }
  /// The sum and the mean over `dims`, broadcast back to `x`'s shape.
  Value sumKeep(Value x, ArrayRef<int64_t> dims) {
    return expand(reduceSum(x, dims), typeOf(x), dims);
  }
  Value meanKeep(Value x, ArrayRef<int64_t> dims) {
    return expand(ReduceMeanOp::create(b, loc, x, dims), typeOf(x), dims);
  }
  /// The number of elements a reduction of `x` over `dims` combines, as a
  /// tensor of the reduced shape.
  Value count(Value x, ArrayRef<int64_t> dims) {
    auto type = typeOf(x);
    SmallVector<int64_t> kept;
    int64_t n = 1;
    bool dynamic = false;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!llvm::is_contained(dims, d))
        kept.push_back(type.getDimSize(d));
      else if (type.isDynamicDim(d))
        dynamic = true;
      else
        n *= type.getDimSize(d);
    }
    if (dynamic)
      return reduceSum(splatLike(x, 1.0), dims);
    return splat(type.clone(kept), static_cast<double>(n));
  }

  Value reshape(Value x, RankedTensorType type) {
    if (typeOf(x) == type)
      return x;
    return ReshapeOp::create(b, loc, type, x);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return reshape(x, typeOf(x).clone(shape));
  }
  /// Result dimension `i` is `x`'s dimension `permutation[i]`.
  Value transpose(Value x, ArrayRef<int64_t> permutation) {
    if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
      return x;
    return TransposeOp::create(b, loc, x, permutation);
  }
  Value slice(Value x, ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
              ArrayRef<int64_t> strides) {
    return SliceOp::create(b, loc, x, start, limit, strides);
  }
  /// The elements `[start[d], start[d] + size[d])` of each dimension; a
  /// size of -1 (with start 0) takes a whole, possibly dynamic, dimension.
  Value window(Value x, ArrayRef<int64_t> start, ArrayRef<int64_t> size) {
    ArrayRef<int64_t> shape = typeOf(x).getShape();
    SmallVector<int64_t> limit;
    bool whole = true;
    for (auto [d, s, n] : llvm::enumerate(start, size)) {
      limit.push_back(n < 0 ? -1 : s + n);
      whole &= s == 0 && (n < 0 || n == shape[d]);
    }
    if (whole)
      return x;
    return slice(x, start, limit, SmallVector<int64_t>(start.size(), 1));
  }
  Value pad(Value x, ArrayRef<int64_t> low, ArrayRef<int64_t> high) {
    if (llvm::all_of(low, [](int64_t n) { return n == 0; }) &&
        llvm::all_of(high, [](int64_t n) { return n == 0; }))
      return x;
    return PadOp::create(b, loc, x, low, high, APFloat(0.0));
  }
  /// `x` with `strides[d] − 1` zeros between neighbours along each
  /// dimension `d` (the interior padding sd.pad lacks): each strided
  /// dimension gets a unit dimension after it, padded to the stride, and
  /// the two merge; the zeros after the last element are sliced off.
  Value interiorPad(Value x, ArrayRef<int64_t> strides) {
    if (llvm::all_of(strides, [](int64_t s) { return s == 1; }))
      return x;
    auto type = typeOf(x);
    SmallVector<int64_t> split, low, high, merged, start, size;
    for (auto [d, stride] : llvm::enumerate(strides)) {
      int64_t n = type.getDimSize(d);
      split.push_back(n);
      low.push_back(0);
      high.push_back(0);
      start.push_back(0);
      size.push_back(stride == 1 ? -1 : (n - 1) * stride + 1);
      merged.push_back(stride == 1 ? n : n * stride);
      if (stride == 1)
        continue;
      split.push_back(1);
      low.push_back(0);
      high.push_back(stride - 1);
    }
    Value spread = pad(reshape(x, split), low, high);
    return window(reshape(spread, merged), start, size);
  }
  Value dot(Value lhs, Value rhs, ArrayRef<int64_t> lhsBatch,
            ArrayRef<int64_t> rhsBatch, ArrayRef<int64_t> lhsContract,
            ArrayRef<int64_t> rhsContract) {
    return DotGeneralOp::create(b, loc, lhs, rhs, lhsBatch, rhsBatch,
                                lhsContract, rhsContract);
  }
  /// Batched matrix products over the two leading dimensions of rank-4
  /// operands (attention's `[B, H, ., .]`), contracting `lhsDim` with
  /// `rhsDim`.
  Value batchedDot(Value lhs, Value rhs, int64_t lhsDim, int64_t rhsDim) {
    return dot(lhs, rhs, {0, 1}, {0, 1}, {lhsDim}, {rhsDim});
  }
};

/// Runs `body` with an emitter and the result's cotangent, after giving
/// every operand a null (no gradient) cotangent; a null result cotangent
/// leaves them null.
template <typename Body>
LogicalResult buildWith(Operation *op, OpBuilder &builder,
                        ValueRange resultCotangents, Cotangents &out,
                        Body body) {
  out.assign(op->getNumOperands(), Value());
  if (!resultCotangents[0])
    return success();
  Emitter e{builder, op->getLoc()};
  return body(e, resultCotangents[0]);
}

/// The VJP of an elementwise op of one operand: `vjp(e, x, y, dy)` builds
/// the operand's cotangent from the operand, the result and its cotangent.
template <typename Fn>
LogicalResult unaryVjp(Operation *op, OpBuilder &builder,
                       ValueRange resultCotangents, Cotangents &out, Fn vjp) {
  return buildWith(op, builder, resultCotangents, out,
                   [&](Emitter &e, Value dy) {
                     out[0] = vjp(e, op->getOperand(0), op->getResult(0), dy);
                     return success();
                   });
}

/// unaryVjp for a function whose derivative is a chain of arithmetic (the
/// transcendental ones, GELU's fifteen ops): on a bf16 op the cotangent is
/// computed in f32 and rounded to bf16 once. Converts widen x, y and dy
/// (exactly) and round the cotangent, as PyTorch's bf16 backward kernels
/// compute it and as the runtime runs it (one fused kernel that converts
/// on load and store), rather than rounding after each op of the chain.
/// The widening converts carry sd.derivative (sd-widen-gradients leaves
/// what they widen bf16); those the derivative does not read are erased.
template <typename Fn>
LogicalResult unaryVjpInF32(Operation *op, OpBuilder &builder,
                            ValueRange resultCotangents, Cotangents &out,
                            Fn vjp) {
  Type element = typeOf(op->getOperand(0)).getElementType();
  if (!element.isBF16())
    return unaryVjp(op, builder, resultCotangents, out, vjp);
  return buildWith(
      op, builder, resultCotangents, out, [&](Emitter &e, Value dy) {
        Type f32 = Float32Type::get(op->getContext());
        Value wide[] = {e.convert(op->getOperand(0), f32),
                        e.convert(op->getResult(0), f32), e.convert(dy, f32)};
        for (Value value : wide)
          value.getDefiningOp()->setAttr(SDDialect::kDerivativeAttrName,
                                         e.b.getUnitAttr());
        out[0] = e.convert(vjp(e, wide[0], wide[1], wide[2]), element);
        for (Value value : wide)
          if (value.use_empty())
            value.getDefiningOp()->erase();
        return success();
      });
}

/// The VJP of an elementwise op of two operands: `vjp(e, x, y, result, dy)`
/// returns both cotangents.
template <typename Fn>
LogicalResult binaryVjp(Operation *op, OpBuilder &builder,
                        ValueRange resultCotangents, Cotangents &out, Fn vjp) {
  return buildWith(
      op, builder, resultCotangents, out, [&](Emitter &e, Value dy) {
        std::tie(out[0], out[1]) =
            vjp(e, op->getOperand(0), op->getOperand(1), op->getResult(0), dy);
        return success();
      });
}

/// A function that builds the VJP of an `OpTy`.
template <typename OpTy>
using VjpFn = LogicalResult (*)(OpTy, OpBuilder &, ValueRange, Cotangents &);

/// Forwards VjpOpInterface::buildVjp of `OpTy` to `Build`.
template <typename OpTy, VjpFn<OpTy> Build>
struct VjpModel
    : public VjpOpInterface::ExternalModel<VjpModel<OpTy, Build>, OpTy> {
  LogicalResult buildVjp(Operation *op, OpBuilder &builder,
                         ValueRange resultCotangents, Cotangents &out) const {
    return Build(cast<OpTy>(op), builder, resultCotangents, out);
  }
};

/// Attaches the VJPs of the layer ops (LayerVjpModels.cpp); the rest of
/// registerVjpModels.
void attachLayerVjpModels(MLIRContext &context);

} // namespace mlir::sd::vjp

#endif // SD_LIB_AUTODIFF_VJPEMITTER_H
