//===- VjpModels.cpp - how each op differentiates -------------------------===//
//
// VjpOpInterface's external models of the elementwise ops, reductions,
// shape ops, sources, the loss, annotations and memory moves; the layers
// (matrix products, normalizations, softmax, attention, convolution,
// upsampling) are in LayerVjpModels.cpp. Each op builds the cotangents of its
// operands from the cotangent of its result, with sd ops only, so that the
// backward pass is sharded, partitioned, evaluated and costed like the forward
// pass. Every cotangent has its operand's type (bf16 operands get bf16
// cotangents). A batch dimension may still be dynamic: constants over it
// are scalars broadcast to the dynamic type, and element counts over it are
// computed by summing ones.
//
//===----------------------------------------------------------------------===//

#include "sd/Autodiff/VjpModels.h"
#include "VjpEmitter.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::vjp;

/// The identity's VJP: the cotangent passes through.
static LogicalResult identityVjp(Operation *op, OpBuilder &builder,
                                 ValueRange resultCotangents, Cotangents &out) {
  return unaryVjp(op, builder, resultCotangents, out,
                  [](Emitter &, Value, Value, Value dy) { return dy; });
}

/// The VJP of an op without differentiable operands (rng offsets).
static LogicalResult noGradient(Operation *op, Cotangents &out) {
  out.assign(op->getNumOperands(), Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult vjpOf(NegOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out,
                  [](Emitter &e, Value, Value, Value dy) { return e.neg(dy); });
}

static LogicalResult vjpOf(ExpOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [](Emitter &e, Value, Value y, Value dy) {
    return e.mul(dy, y);
  });
}

static LogicalResult vjpOf(LogOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [](Emitter &e, Value x, Value, Value dy) {
    return e.div(dy, x);
  });
}

static LogicalResult vjpOf(SqrtOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d sqrt(x) = 1 / (2 sqrt(x)).
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value, Value y, Value dy) {
                         return e.div(e.scale(dy, 0.5), y);
                       });
}

static LogicalResult vjpOf(RsqrtOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d x^(-1/2) = -x^(-3/2) / 2 = -y³ / 2.
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value, Value y, Value dy) {
                         return e.mul(e.scale(dy, -0.5), e.mul(y, e.mul(y, y)));
                       });
}

static LogicalResult vjpOf(TanhOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value, Value y, Value dy) {
                         return e.mul(dy, e.rsub(1.0, e.mul(y, y)));
                       });
}

static LogicalResult vjpOf(SinOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value x, Value, Value dy) {
                         return e.mul(dy, CosOp::create(e.b, e.loc, x));
                       });
}

static LogicalResult vjpOf(CosOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value x, Value, Value dy) {
                         return e.neg(e.mul(dy, SinOp::create(e.b, e.loc, x)));
                       });
}

static LogicalResult vjpOf(SigmoidOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value, Value y, Value dy) {
                         return e.mul(dy, e.mul(y, e.rsub(1.0, y)));
                       });
}

static LogicalResult vjpOf(SiluOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d x·s(x) = s + x·s·(1 − s) = s + y·(1 − s).
  return unaryVjpInF32(op, b, cts, out,
                       [](Emitter &e, Value x, Value y, Value dy) {
                         Value s = SigmoidOp::create(e.b, e.loc, x);
                         return e.mul(dy, e.add(s, e.mul(y, e.rsub(1.0, s))));
                       });
}

static LogicalResult vjpOf(ErfOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d erf(x) = 2/sqrt(π) · e^(−x²).
  return unaryVjpInF32(
      op, b, cts, out, [](Emitter &e, Value x, Value, Value dy) {
        Value gauss = ExpOp::create(e.b, e.loc, e.neg(e.mul(x, x)));
        return e.mul(e.scale(dy, 2 * llvm::numbers::inv_sqrtpi), gauss);
      });
}

/// The derivative of the tanh-approximated gelu 0.5·x·(1 + tanh(u)),
/// u = c·(x + a·x³): 0.5·(1 + t) + 0.5·x·(1 − t²)·c·(1 + 3a·x²), written
/// with s = σ(2u) = 0.5·(1 + t), so 0.5·(1 − t²) = 2·s·(1 − s): one
/// exponential and one division per element, as in the forward.
static Value geluTanhDerivative(Emitter &e, Value x) {
  const double c = std::sqrt(2.0 / llvm::numbers::pi), a = 0.044715;
  Value x2 = e.mul(x, x);
  Value u2 = e.scale(e.add(x, e.scale(e.mul(x, x2), a)), 2 * c);
  Value s = SigmoidOp::create(e.b, e.loc, u2);
  Value du = e.add(e.splatLike(x, c), e.scale(x2, 3 * a * c));
  Value inner = e.mul(e.scale(x, 2.0), e.mul(e.mul(s, e.rsub(1.0, s)), du));
  return e.add(s, inner);
}

/// The derivative of the exact gelu x·Φ(x): Φ(x) + x·φ(x), with
/// Φ(x) = (1 + erf(x/√2)) / 2 and φ(x) = e^(−x²/2) / √(2π).
static Value geluErfDerivative(Emitter &e, Value x) {
  Value cdf = e.scale(
      e.add(e.splatLike(x, 1.0),
            ErfOp::create(e.b, e.loc, e.scale(x, llvm::numbers::inv_sqrt2))),
      0.5);
  Value pdf = e.scale(ExpOp::create(e.b, e.loc, e.scale(e.mul(x, x), -0.5)),
                      llvm::numbers::inv_sqrtpi * llvm::numbers::inv_sqrt2);
  return e.add(cdf, e.mul(x, pdf));
}

static LogicalResult vjpOf(GeluOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  bool approximate = op.getApproximate();
  return unaryVjpInF32(
      op, b, cts, out, [&](Emitter &e, Value x, Value, Value dy) {
        return e.mul(dy, approximate ? geluTanhDerivative(e, x)
                                     : geluErfDerivative(e, x));
      });
}

using ValuePair = std::pair<Value, Value>;

static LogicalResult vjpOf(AddOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return binaryVjp(op, b, cts, out,
                   [](Emitter &, Value, Value, Value, Value dy) {
                     return ValuePair(dy, dy);
                   });
}

static LogicalResult vjpOf(SubOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return binaryVjp(op, b, cts, out,
                   [](Emitter &e, Value, Value, Value, Value dy) {
                     return ValuePair(dy, e.neg(dy));
                   });
}

static LogicalResult vjpOf(MulOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return binaryVjp(op, b, cts, out,
                   [](Emitter &e, Value x, Value y, Value, Value dy) {
                     return ValuePair(e.mul(dy, y), e.mul(dy, x));
                   });
}

static LogicalResult vjpOf(DivOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d(x/y)/dy = −(x/y)/y.
  return binaryVjp(op, b, cts, out,
                   [](Emitter &e, Value, Value y, Value q, Value dy) {
                     Value dx = e.div(dy, y);
                     return ValuePair(dx, e.neg(e.mul(dx, q)));
                   });
}

/// max (`direction` gt) and min (lt): the cotangent goes to the operand
/// that wins; on a tie each operand gets half, as in JAX.
static ValuePair extremumVjp(Emitter &e, CompareDirection direction, Value x,
                             Value y, Value dy) {
  Value half = e.select(e.compare(CompareDirection::eq, x, y), e.scale(dy, 0.5),
                        e.splatLike(dy, 0.0));
  Value dx = e.select(e.compare(direction, x, y), dy, half);
  return {dx, e.sub(dy, dx)};
}

static LogicalResult vjpOf(MaxOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return binaryVjp(op, b, cts, out,
                   [](Emitter &e, Value x, Value y, Value, Value dy) {
                     return extremumVjp(e, CompareDirection::gt, x, y, dy);
                   });
}

static LogicalResult vjpOf(MinOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return binaryVjp(op, b, cts, out,
                   [](Emitter &e, Value x, Value y, Value, Value dy) {
                     return extremumVjp(e, CompareDirection::lt, x, y, dy);
                   });
}

static LogicalResult vjpOf(PowOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d x^y/dx = y·x^(y−1); d x^y/dy = x^y·ln(x), taken as 0 where x <= 0
  // (where it is undefined or, at x = 0, the limit of a vanishing power).
  return binaryVjp(
      op, b, cts, out, [](Emitter &e, Value x, Value y, Value p, Value dy) {
        Value lower =
            PowOp::create(e.b, e.loc, x, e.add(y, e.splatLike(y, -1.0)));
        Value dx = e.mul(dy, e.mul(y, lower));
        Value logx = LogOp::create(e.b, e.loc, x);
        Value positive =
            e.compare(CompareDirection::gt, x, e.splatLike(x, 0.0));
        Value dyExp =
            e.select(positive, e.mul(dy, e.mul(p, logx)), e.splatLike(dy, 0.0));
        return ValuePair(dx, dyExp);
      });
}

static LogicalResult vjpOf(SelectOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dy) {
    Value zero = e.splatLike(dy, 0.0);
    out[1] = e.select(op.getPred(), dy, zero);
    out[2] = e.select(op.getPred(), zero, dy);
    return success();
  });
}

static LogicalResult vjpOf(ConvertOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  Type from = op.getOperand().getType().getElementType();
  // From i1 (a mask), nothing flows back.
  if (!isa<FloatType>(from))
    return noGradient(op, out);
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value, Value, Value dy) {
    return e.convert(dy, from);
  });
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult vjpOf(ReduceSumOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value x, Value, Value dy) {
    return e.expand(dy, typeOf(x), op.getDims());
  });
}

static LogicalResult vjpOf(ReduceMeanOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value x, Value, Value dy) {
    return e.expand(e.div(dy, e.count(x, op.getDims())), typeOf(x),
                    op.getDims());
  });
}

static LogicalResult vjpOf(ReduceMaxOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // The cotangent goes to the maxima; tied maxima share it equally (as in
  // JAX), so each gets dy / (number of maxima).
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value x, Value y, Value dy) {
    auto type = typeOf(x);
    Value isMax =
        e.compare(CompareDirection::eq, x, e.expand(y, type, op.getDims()));
    Value onMax = e.convert(isMax, type.getElementType());
    Value share = e.div(dy, e.reduceSum(onMax, op.getDims()));
    return e.mul(onMax, e.expand(share, type, op.getDims()));
  });
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

static LogicalResult vjpOf(BroadcastInDimOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // Sum over the new dimensions and the repeated size-1 ones; the latter
  // come back as reshaped unit dimensions.
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value x, Value y, Value dy) {
    auto from = typeOf(x), to = typeOf(y);
    SmallVector<int64_t> summed = complement(to.getRank(), op.getDims());
    for (auto [i, d] : llvm::enumerate(op.getDims()))
      if (from.getDimSize(i) == 1 && to.getDimSize(d) != 1)
        summed.push_back(d);
    llvm::sort(summed);
    return e.reshape(e.reduceSum(dy, summed), from);
  });
}

static LogicalResult vjpOf(ReshapeOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [](Emitter &e, Value x, Value, Value dy) {
    return e.reshape(dy, typeOf(x));
  });
}

static LogicalResult vjpOf(TransposeOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value, Value, Value dy) {
    SmallVector<int64_t> inverse(op.getPermutation().size());
    for (auto [i, p] : llvm::enumerate(op.getPermutation()))
      inverse[p] = i;
    return e.transpose(dy, inverse);
  });
}

static LogicalResult vjpOf(SliceOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // The taken elements back in place: spread by the strides, then padded
  // to the operand's extent. A dynamic dimension is taken whole.
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value x, Value, Value dy) {
    auto type = typeOf(x);
    Value spread = e.interiorPad(dy, op.getStrides());
    SmallVector<int64_t> high;
    for (auto [d, start] : llvm::enumerate(op.getStart())) {
      int64_t taken = typeOf(spread).getDimSize(d);
      high.push_back(type.isDynamicDim(d) ? 0
                                          : type.getDimSize(d) - start - taken);
    }
    return e.pad(spread, op.getStart(), high);
  });
}

/// Fails, after an error on `op`, where its VJP would slice dimension
/// `dim` of `type` partially though it is dynamic.
static LogicalResult requireStatic(Operation *op, RankedTensorType type,
                                   int64_t dim) {
  if (!type.isDynamicDim(dim))
    return success();
  return op->emitOpError("cannot be differentiated along dynamic dimension ")
         << dim << " of " << type
         << "; run sd-specialize-batch before differentiating";
}

static LogicalResult vjpOf(ConcatOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // Each input's cotangent is its window of the result's.
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dy) {
    auto dim = static_cast<int64_t>(op.getDim());
    if (failed(requireStatic(op, typeOf(dy), dim)))
      return failure();
    int64_t offset = 0;
    for (auto [i, input] : llvm::enumerate(op.getInputs())) {
      int64_t rank = typeOf(input).getRank();
      SmallVector<int64_t> start(rank, 0), size(rank, -1);
      start[dim] = offset;
      size[dim] = typeOf(input).getDimSize(dim);
      out[i] = e.window(dy, start, size);
      offset += size[dim];
    }
    return success();
  });
}

static LogicalResult vjpOf(PadOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // The operand's window of the result's cotangent; the padding value is
  // a constant.
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dy) {
    auto type = op.getOperand().getType();
    SmallVector<int64_t> size;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      bool padded = op.getLow()[d] != 0 || op.getHigh()[d] != 0;
      if (padded && failed(requireStatic(op, type, d)))
        return failure();
      size.push_back(padded ? type.getDimSize(d) : -1);
    }
    out[0] = e.window(dy, op.getLow(), size);
    return success();
  });
}

//===----------------------------------------------------------------------===//
// Random numbers, loss, annotations, memory moves
//===----------------------------------------------------------------------===//

static LogicalResult vjpOf(MseLossOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // d mean((p − t)²) = 2(p − t)/n for p, the negation for t.
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dy) {
    Value p = op.getPredictions(), t = op.getTargets();
    auto type = typeOf(p);
    SmallVector<int64_t> all = iota(type.getRank());
    // One op per statement: the order of a call's arguments is unspecified,
    // and the ops must come out in one order whatever compiled sd.
    Value count = e.count(p, all);
    Value twice = e.scale(e.convert(dy, type.getElementType()), 2.0);
    Value perElement = e.div(twice, count);
    Value expanded = e.expand(perElement, type, all);
    Value difference = e.sub(p, t);
    out[0] = e.mul(difference, expanded);
    out[1] = e.neg(out[0]);
    return success();
  });
}

static LogicalResult vjpOf(ShardingConstraintOp op, OpBuilder &b,
                           ValueRange cts, Cotangents &out) {
  // The cotangent is pinned like the value.
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value, Value, Value dy) {
    return ShardingConstraintOp::create(e.b, e.loc, dy, op.getShardingAttr(),
                                        op.getLogicalAttr())
        .getResult();
  });
}

/// The sharding `value` was given (`sd.sharding` on its defining op or
/// function argument), or null.
static ShardingAttr shardingOf(Value value) {
  StringRef key = SDDialect::kShardingAttrName;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    return func ? func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), key)
                : ShardingAttr();
  }
  auto perValue =
      value.getDefiningOp()->getAttrOfType<ShardingPerValueAttr>(key);
  unsigned index = cast<OpResult>(value).getResultNumber();
  if (!perValue || perValue.getShardings().size() <= index)
    return {};
  return perValue.getShardings()[index];
}

static LogicalResult vjpOf(ReshardOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // Back to the operand's layout where it has one: closed, without
  // priorities, and without unreduced axes (the cotangent of a partial sum
  // is not one).
  return unaryVjp(
      op, b, cts, out, [&](Emitter &e, Value x, Value, Value dy) -> Value {
        ShardingAttr sharding = shardingOf(x);
        if (!sharding)
          return dy;
        MLIRContext *context = op.getContext();
        SmallVector<DimShardingAttr> dims;
        for (DimShardingAttr dim : sharding.getDimShardings())
          dims.push_back(DimShardingAttr::get(context, dim.getAxes(),
                                              /*is_closed=*/true,
                                              std::nullopt));
        auto target = ShardingAttr::get(context, sharding.getMeshName(), dims,
                                        sharding.getReplicatedAxes());
        return ReshardOp::create(e.b, e.loc, dy, target);
      });
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {
/// The ops above, by their `vjpOf`.
template <typename OpTy> using OwnVjp = VjpModel<OpTy, vjpOf>;

/// Ops none of whose operands is differentiable: a predicate is piecewise
/// constant, and rng offsets only place the block.
template <typename OpTy>
struct NoGradientVjp
    : public VjpOpInterface::ExternalModel<NoGradientVjp<OpTy>, OpTy> {
  LogicalResult buildVjp(Operation *op, OpBuilder &, ValueRange,
                         Cotangents &out) const {
    return noGradient(op, out);
  }
};

/// The memory moves are the identity: the cotangent passes through.
template <typename OpTy>
struct IdentityVjp
    : public VjpOpInterface::ExternalModel<IdentityVjp<OpTy>, OpTy> {
  LogicalResult buildVjp(Operation *op, OpBuilder &builder,
                         ValueRange resultCotangents, Cotangents &out) const {
    return identityVjp(op, builder, resultCotangents, out);
  }
};
} // namespace

// Every op with a float operand; constant and iota have none, and
// collectives and axis_index exist only after partitioning.
void mlir::sd::registerVjpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attachModels<OwnVjp,
                 // Elementwise.
                 SD_ELEMENTWISE_MATH_OPS, SelectOp, ConvertOp,
                 // Reductions and shapes.
                 ReduceSumOp, ReduceMeanOp, ReduceMaxOp, BroadcastInDimOp,
                 ReshapeOp, TransposeOp, SliceOp, ConcatOp, PadOp,
                 // The loss and annotations.
                 MseLossOp, ShardingConstraintOp, ReshardOp>(*context);
    attachModels<NoGradientVjp, CompareOp, RngNormalOp, RngUniformOp>(*context);
    attachModels<IdentityVjp, OffloadOp, ReloadOp>(*context);
    attachLayerVjpModels(*context);
  });
}
