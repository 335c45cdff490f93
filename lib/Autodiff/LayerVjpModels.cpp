//===- LayerVjpModels.cpp - how the layer ops differentiate ---------------===//
//
// VjpOpInterface's external models of the ops that make up layers: matrix
// products, normalizations, softmax, attention, convolution and
// upsampling (the others are in VjpModels.cpp). Each is written with sd ops
// only, recomputing what it needs (normalization statistics, attention
// probabilities) from the op's operands.
//
//===----------------------------------------------------------------------===//

#include "VjpEmitter.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::vjp;

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

namespace {
/// One dot_general operand's dimension roles.
struct DotDims {
  ArrayRef<int64_t> batch, contract;
  SmallVector<int64_t> free;
  DotDims(int64_t rank, ArrayRef<int64_t> batch, ArrayRef<int64_t> contract)
      : batch(batch), contract(contract) {
    SmallVector<int64_t> listed(batch);
    listed.append(contract.begin(), contract.end());
    free = complement(rank, listed);
  }
};
} // namespace

/// The cotangent of one dot_general operand (JAX's transpose rule): `dy`
/// contracted with the `other` operand over the other's free dimensions
/// (`dyOtherFree` in dy), batched like the product, then transposed into
/// the operand's dimension order.
static Value dotCotangent(Emitter &e, Value operand, const DotDims &dims,
                          Value dy, ArrayRef<int64_t> dyOtherFree, Value other,
                          const DotDims &otherDims) {
  Type elementType = typeOf(operand).getElementType();
  Value product =
      e.dot(e.convert(dy, elementType), other, iota(dims.batch.size()),
            otherDims.batch, dyOtherFree, otherDims.free);
  // The product's dimensions: batch, the operand's free dimensions, then
  // the other's contracted ones in its order, i.e. the operand's paired
  // contracted dimensions.
  SmallVector<int64_t> source(dims.batch);
  source.append(dims.free.begin(), dims.free.end());
  SmallVector<int64_t> pairs = iota(dims.contract.size());
  llvm::sort(pairs, [&](int64_t i, int64_t j) {
    return otherDims.contract[i] < otherDims.contract[j];
  });
  for (int64_t k : pairs)
    source.push_back(dims.contract[k]);
  SmallVector<int64_t> permutation(source.size());
  for (auto [position, d] : llvm::enumerate(source))
    permutation[d] = position;
  return e.transpose(product, permutation);
}

static LogicalResult vjpOf(DotGeneralOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dy) {
    DotDims lhs(op.getLhs().getType().getRank(), op.getLhsBatch(),
                op.getLhsContract());
    DotDims rhs(op.getRhs().getType().getRank(), op.getRhsBatch(),
                op.getRhsContract());
    // dy's dimensions: batch, lhs free, rhs free.
    int64_t numBatch = lhs.batch.size(), numLhsFree = lhs.free.size();
    SmallVector<int64_t> lhsFree =
        llvm::to_vector(llvm::seq<int64_t>(numBatch, numBatch + numLhsFree));
    SmallVector<int64_t> rhsFree = llvm::to_vector(
        llvm::seq<int64_t>(numBatch + numLhsFree, typeOf(dy).getRank()));
    out[0] = dotCotangent(e, op.getLhs(), lhs, dy, rhsFree, op.getRhs(), rhs);
    out[1] = dotCotangent(e, op.getRhs(), rhs, dy, lhsFree, op.getLhs(), lhs);
    return success();
  });
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

/// softmax's VJP along `dim`: y ⊙ (dy − Σ(dy ⊙ y)).
static Value softmaxCotangent(Emitter &e, Value y, Value dy, int64_t dim) {
  return e.mul(y, e.sub(dy, e.sumKeep(e.mul(dy, y), {dim})));
}

static LogicalResult vjpOf(SoftmaxOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value, Value y, Value dy) {
    return softmaxCotangent(e, y, dy, static_cast<int64_t>(op.getDim()));
  });
}

namespace {
/// What a normalization computes: `y = x̂ · scale + bias` (scale and bias
/// optional, per channel of the last dimension), where x̂ normalizes the
/// operand viewed as `view` over the view's dimensions `dims`:
/// x̂ = (x − mean)·rstd when `center`, else x·rstd, with
/// rstd = 1/sqrt(mean of squares + epsilon).
struct NormSpec {
  Value x, scale, bias;
  RankedTensorType view;
  SmallVector<int64_t> dims;
  double epsilon;
  bool center;
};
} // namespace

/// The cotangents of the normalization `n`, in operand order (x, then scale
/// and bias where present). The statistics are recomputed from x.
static LogicalResult normVjp(Operation *op, OpBuilder &builder,
                             ValueRange resultCotangents, Cotangents &out,
                             const NormSpec &n) {
  return buildWith(
      op, builder, resultCotangents, out, [&](Emitter &e, Value dy) {
        Value xv = e.reshape(n.x, n.view);
        Value centered = n.center ? e.sub(xv, e.meanKeep(xv, n.dims)) : xv;
        Value variance =
            ReduceMeanOp::create(e.b, e.loc, e.mul(centered, centered), n.dims);
        Value rstd = e.expand(
            RsqrtOp::create(e.b, e.loc,
                            e.add(variance, e.splatLike(variance, n.epsilon))),
            n.view, n.dims);
        Value xhat = e.mul(centered, rstd);

        // The affine part, in the operand's shape.
        auto type = typeOf(n.x);
        int64_t last = type.getRank() - 1;
        SmallVector<int64_t> leading = iota(last);
        Value g = dy;
        unsigned next = 1;
        if (n.scale) {
          g = e.mul(dy, e.broadcast(n.scale, type, {last}));
          out[next++] = e.reduceSum(e.mul(dy, e.reshape(xhat, type)), leading);
        }
        if (n.bias)
          out[next] = e.reduceSum(dy, leading);

        // rstd · (g − mean(g) − x̂·mean(g·x̂)); without centering, no mean(g).
        Value gv = e.reshape(g, n.view);
        Value projected = e.mul(xhat, e.meanKeep(e.mul(gv, xhat), n.dims));
        Value gc = n.center ? e.sub(gv, e.meanKeep(gv, n.dims)) : gv;
        out[0] = e.reshape(e.mul(rstd, e.sub(gc, projected)), type);
        return success();
      });
}

/// A normalization over the last dimension of `x` (layer_norm, rms_norm).
static NormSpec lastDimNorm(Value x, Value scale, Value bias,
                            const APFloat &epsilon, bool center) {
  auto type = typeOf(x);
  SmallVector<int64_t> last = {type.getRank() - 1};
  return {x, scale, bias, type, last, epsilon.convertToDouble(), center};
}

static LogicalResult vjpOf(LayerNormOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return normVjp(op, b, cts, out,
                 lastDimNorm(op.getOperand(), op.getScale(), op.getBias(),
                             op.getEpsilon(),
                             /*center=*/true));
}

static LogicalResult vjpOf(RmsNormOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return normVjp(op, b, cts, out,
                 lastDimNorm(op.getOperand(), op.getScale(), Value(),
                             op.getEpsilon(),
                             /*center=*/false));
}

static LogicalResult vjpOf(GroupNormOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // [N, ..., C] viewed as [N, positions, groups, C / groups], normalized
  // over positions and the group's channels.
  auto type = op.getOperand().getType();
  int64_t groups = op.getNumGroups(), channels = type.getShape().back();
  int64_t positions = 1;
  for (int64_t d : type.getShape().drop_front().drop_back())
    positions *= d;
  auto view =
      type.clone({type.getDimSize(0), positions, groups, channels / groups});
  SmallVector<int64_t> dims = {1, 3};
  NormSpec spec{op.getOperand(),
                op.getScale(),
                op.getBias(),
                view,
                dims,
                op.getEpsilon().convertToDouble(),
                /*center=*/true};
  return normVjp(op, b, cts, out, spec);
}

//===----------------------------------------------------------------------===//
// Attention, convolution, upsampling
//===----------------------------------------------------------------------===//

static LogicalResult vjpOf(AttentionOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // P = softmax(scale·QKᵀ) over the allowed keys is recomputed; masked
  // scores are pushed down by 1e30, so that their weights vanish, and P is
  // multiplied by the mask, so that a row with no allowed key is zero as in
  // the forward pass. The mask gets no cotangent.
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dO) {
    Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
    double scale = op.getEffectiveScale();
    Value scores = e.scale(e.batchedDot(q, k, 3, 3), scale);
    Value allowed;
    if (Value mask = op.getMask()) {
      auto type = typeOf(scores);
      allowed = e.broadcast(e.convert(mask, type.getElementType()), type,
                            {0, 1, 2, 3});
      Value penalty = e.scale(e.add(allowed, e.splatLike(allowed, -1.0)), 1e30);
      scores = e.add(scores, penalty);
    }
    Value soft = SoftmaxOp::create(e.b, e.loc, scores, 3);
    Value p = allowed ? e.mul(soft, allowed) : soft;
    out[2] = e.batchedDot(p, dO, 2, 2);
    Value dP = e.batchedDot(dO, v, 3, 3);
    if (allowed)
      dP = e.mul(dP, allowed);
    Value dS = e.scale(softmaxCotangent(e, soft, dP, 3), scale);
    out[0] = e.batchedDot(dS, k, 3, 2);
    out[1] = e.batchedDot(dS, q, 2, 2);
    return success();
  });
}

static LogicalResult vjpOf(FlashAttentionOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // FlashAttention-2's backward from the saved output and log-sum-exp: dQ
  // in one op, dK and dV in another (their sums run over different
  // factors; see sd.flash_attention_dq). The mask gets no cotangent.
  out.assign(op->getNumOperands(), Value());
  if (cts[1])
    return op.emitOpError(
        "cannot be differentiated through its log-sum-exp result");
  if (!cts[0])
    return success();
  Location loc = op.getLoc();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value o = op.getResult(), lse = op.getLogsumexp(), mask = op.getMask();
  FloatAttr scale = op.getScaleAttr();
  FlashBlocksAttr blocks = op.getBlocks();
  ContextParallelAttr context = op.getContextParallelAttr();
  IntegerAttr shards = op.getUlyssesShardsAttr();
  // dK/dV first: with use_fused_bwd_kernel the OpenMP target computes dQ in
  // the dK/dV pass of the op that precedes it.
  auto dkv = FlashAttentionDkvOp::create(b, loc, q, k, v, o, lse, cts[0],
                                         mask, scale, blocks, context, shards);
  out[0] = FlashAttentionDqOp::create(b, loc, q, k, v, o, lse, cts[0], mask,
                                     scale, blocks, context, shards);
  out[1] = dkv.getDKey();
  out[2] = dkv.getDValue();
  return success();
}

static LogicalResult vjpOf(Conv2DOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // Each gradient is a convolution op of its own (a transposed convolution
  // for the input, an im2col contraction for the kernel), so one sharding
  // rule and halo exchange serve both passes.
  return buildWith(op, b, cts, out, [&](Emitter &e, Value dy) {
    out[0] = Conv2DInputGradOp::create(e.b, e.loc, op.getInput().getType(), dy,
                                       op.getKernel(), op.getStrides(),
                                       op.getPadding(), op.getGroups());
    out[1] = Conv2DFilterGradOp::create(e.b, e.loc, op.getKernel().getType(),
                                        op.getInput(), dy, op.getStrides(),
                                        op.getPadding(), op.getGroups());
    if (op.getBias())
      out[2] = e.reduceSum(dy, {0, 1, 2});
    return success();
  });
}

// The gradients are linear in each operand, and each one's transpose is
// another of the three convolutions: dx = input_grad(dy, w) sends its
// cotangent c to dy as conv2d(c, w) and to w as filter_grad(c, dy);
// dw = filter_grad(x, dy) sends c to x as input_grad(dy, c) and to dy as
// conv2d(x, c).
static LogicalResult vjpOf(Conv2DInputGradOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return buildWith(op, b, cts, out, [&](Emitter &e, Value c) {
    out[0] = Conv2DOp::create(e.b, e.loc, c, op.getKernel(), Value(),
                              op.getStrides(), op.getPadding(), op.getGroups());
    out[1] = Conv2DFilterGradOp::create(e.b, e.loc, op.getKernel().getType(), c,
                                        op.getResultGrad(), op.getStrides(),
                                        op.getPadding(), op.getGroups());
    return success();
  });
}

static LogicalResult vjpOf(Conv2DFilterGradOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  return buildWith(op, b, cts, out, [&](Emitter &e, Value c) {
    out[0] = Conv2DInputGradOp::create(e.b, e.loc, op.getInput().getType(),
                                       op.getResultGrad(), c, op.getStrides(),
                                       op.getPadding(), op.getGroups());
    out[1] = Conv2DOp::create(e.b, e.loc, op.getInput(), c, Value(),
                              op.getStrides(), op.getPadding(), op.getGroups());
    return success();
  });
}

static LogicalResult vjpOf(UpsampleNearestOp op, OpBuilder &b, ValueRange cts,
                           Cotangents &out) {
  // Each input pixel's cotangent is the sum over its block of copies.
  return unaryVjp(op, b, cts, out, [&](Emitter &e, Value x, Value, Value dy) {
    ArrayRef<int64_t> shape = typeOf(x).getShape();
    ArrayRef<int64_t> scale = op.getScale();
    Value blocks = e.reshape(
        dy, {shape[0], shape[1], scale[0], shape[2], scale[1], shape[3]});
    return e.reduceSum(blocks, {2, 4});
  });
}

/// The ops above, by their `vjpOf`.
template <typename OpTy> using OwnVjp = VjpModel<OpTy, vjpOf>;

void mlir::sd::vjp::attachLayerVjpModels(MLIRContext &context) {
  attachModels<OwnVjp, DotGeneralOp, SoftmaxOp, LayerNormOp, RmsNormOp,
               GroupNormOp, AttentionOp, FlashAttentionOp, Conv2DOp,
               Conv2DInputGradOp, Conv2DFilterGradOp, UpsampleNearestOp>(
      context);
}
