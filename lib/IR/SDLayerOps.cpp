//===- SDLayerOps.cpp - The layer ops -------------------------------------===//
//
// Result-type inference and verifiers of the ops that make up layers:
// matrix products, normalizations, softmax, attention (plain, flash and
// flash's backward ops), convolution with its gradients, and upsampling.
// They report like the other sd ops, through the helpers of SDOpsHelpers.h.
//
//===----------------------------------------------------------------------===//

#include "SDOpsHelpers.h"

#include "sd/IR/SDOps.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::ops_detail;

/// A 1-D per-channel operand (norm scale/bias, conv bias) of `size`.
static LogicalResult checkChannelOperand(const InferError &error,
                                         StringRef what, Value operand,
                                         int64_t size, Type elementType) {
  if (!operand)
    return success();
  auto type = cast<RankedTensorType>(operand.getType());
  if (type.getRank() != 1 || !compatible(type.getDimSize(0), size) ||
      type.getElementType() != elementType)
    return error(what, " must be a 1-D tensor of ", size, " ", elementType,
                 ", not ", type);
  return success();
}

static LogicalResult checkEpsilon(const InferError &error, FloatAttr eps) {
  if (eps && !(eps.getValueAsDouble() > 0.0))
    return error("epsilon must be positive, not ", eps.getValueAsDouble());
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, attention, convolution
//===----------------------------------------------------------------------===//

LogicalResult DotGeneralOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  ArrayRef<int64_t> lb = adaptor.getLhsBatch(), rb = adaptor.getRhsBatch(),
                    lc = adaptor.getLhsContract(),
                    rc = adaptor.getRhsContract();
  if (lhs.getElementType() != rhs.getElementType())
    return error("operand element types ", lhs.getElementType(), " and ",
                 rhs.getElementType(), " differ");
  if (lb.size() != rb.size())
    return error("batch dimension lists ", formatList(lb), " and ",
                 formatList(rb), " have different lengths");
  if (lc.size() != rc.size())
    return error("contracting dimension lists ", formatList(lc), " and ",
                 formatList(rc), " have different lengths");
  SmallVector<int64_t> lhsDims(lb), rhsDims(rb);
  lhsDims.append(lc.begin(), lc.end());
  rhsDims.append(rc.begin(), rc.end());
  if (failed(checkDimList(error, "lhs batch and contracting dimensions",
                          lhsDims, lhs.getRank())) ||
      failed(checkDimList(error, "rhs batch and contracting dimensions",
                          rhsDims, rhs.getRank())))
    return failure();
  for (auto [l, r] : llvm::zip(lhsDims, rhsDims))
    if (!compatible(lhs.getDimSize(l), rhs.getDimSize(r)))
      return error("lhs dimension ", l, " of size ", lhs.getDimSize(l),
                   " does not match rhs dimension ", r, " of size ",
                   rhs.getDimSize(r));
  SmallVector<int64_t> shape;
  for (auto [l, r] : llvm::zip(lb, rb))
    shape.push_back(lhs.isDynamicDim(l) ? rhs.getDimSize(r)
                                        : lhs.getDimSize(l));
  for (int64_t d = 0; d < lhs.getRank(); ++d)
    if (!llvm::is_contained(lhsDims, d))
      shape.push_back(lhs.getDimSize(d));
  for (int64_t d = 0; d < rhs.getRank(); ++d)
    if (!llvm::is_contained(rhsDims, d))
      shape.push_back(rhs.getDimSize(d));
  types.push_back(lhs.clone(shape));
  return success();
}

bool DotGeneralOp::isCompatibleReturnTypes(TypeRange inferred,
                                           TypeRange actual) {
  return isInferredOrF32(inferred, actual);
}

/// Whether an operand's dimensions are laid out as `batch`, then `first`,
/// then `second`, each group in order.
static bool hasLayout(ArrayRef<int64_t> batch, ArrayRef<int64_t> first,
                      ArrayRef<int64_t> second) {
  int64_t next = 0;
  for (ArrayRef<int64_t> group : {batch, first, second})
    for (int64_t d : group)
      if (d != next++)
        return false;
  return true;
}

/// The dimensions of a rank-`rank` operand that are neither batch nor
/// contracting.
static SmallVector<int64_t> freeDims(int64_t rank, ArrayRef<int64_t> batch,
                                     ArrayRef<int64_t> contract) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(batch, d) && !llvm::is_contained(contract, d))
      dims.push_back(d);
  return dims;
}

SmallVector<int64_t> DotGeneralOp::getLhsFreeDims() {
  return freeDims(getLhs().getType().getRank(), getLhsBatch(),
                  getLhsContract());
}

SmallVector<int64_t> DotGeneralOp::getRhsFreeDims() {
  return freeDims(getRhs().getType().getRank(), getRhsBatch(),
                  getRhsContract());
}

DotGeneralOp::GemmOperands DotGeneralOp::getGemmOperands() {
  ArrayRef<int64_t> lb = getLhsBatch(), rb = getRhsBatch();
  ArrayRef<int64_t> lc = getLhsContract(), rc = getRhsContract();
  SmallVector<int64_t> lf = getLhsFreeDims(), rf = getRhsFreeDims();
  GemmOperands gemm;
  gemm.transLhs = hasLayout(lb, lc, lf) && !hasLayout(lb, lf, lc);
  gemm.transRhs = hasLayout(rb, rf, rc) && !hasLayout(rb, rc, rf);
  gemm.copyLhs = !hasLayout(lb, lf, lc) && !hasLayout(lb, lc, lf);
  gemm.copyRhs = !hasLayout(rb, rc, rf) && !hasLayout(rb, rf, rc);
  return gemm;
}

/// Shared checks of layer_norm / rms_norm: rank >= 1, affine operands of the
/// last dimension's size.
static LogicalResult inferLastDimNorm(StringRef opName,
                                      std::optional<Location> loc,
                                      Value operand, Value scale, Value bias,
                                      FloatAttr eps,
                                      SmallVectorImpl<Type> &types) {
  InferError error(loc, opName);
  auto type = cast<RankedTensorType>(operand.getType());
  if (type.getRank() < 1)
    return error("operand must have rank at least 1");
  int64_t size = type.getDimSize(type.getRank() - 1);
  if (failed(checkChannelOperand(error, "scale", scale, size,
                                 type.getElementType())) ||
      failed(checkChannelOperand(error, "bias", bias, size,
                                 type.getElementType())) ||
      failed(checkEpsilon(error, eps)))
    return failure();
  types.push_back(type);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferLastDimNorm(getOperationName(), loc, adaptor.getOperand(),
                          adaptor.getScale(), adaptor.getBias(),
                          adaptor.getEpsilonAttr(), types);
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferLastDimNorm(getOperationName(), loc, adaptor.getOperand(),
                          adaptor.getScale(), Value(), adaptor.getEpsilonAttr(),
                          types);
}

LogicalResult GroupNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto type = cast<RankedTensorType>(adaptor.getOperand().getType());
  if (type.getRank() < 2)
    return error("operand must have rank at least 2 ([N, ..., C])");
  int64_t channels = type.getDimSize(type.getRank() - 1);
  int64_t groups = static_cast<int64_t>(adaptor.getNumGroups());
  if (groups <= 0 || (!isDyn(channels) && channels % groups != 0))
    return error("groups = ", groups, " must be positive and divide the ",
                 channels, " channels");
  if (failed(checkChannelOperand(error, "scale", adaptor.getScale(), channels,
                                 type.getElementType())) ||
      failed(checkChannelOperand(error, "bias", adaptor.getBias(), channels,
                                 type.getElementType())) ||
      failed(checkEpsilon(error, adaptor.getEpsilonAttr())))
    return failure();
  types.push_back(type);
  return success();
}

LogicalResult SoftmaxOp::verify() {
  int64_t dim = getDim();
  if (dim < 0 || dim >= getType().getRank())
    return emitOpError("dim ")
           << dim << " is out of range for rank " << getType().getRank();
  return success();
}

/// The attention output type `[B, H, Sq, Dv]` of query, key, value and the
/// optional mask, after the checks every attention op shares.
static FailureOr<RankedTensorType> inferAttentionType(const InferError &error,
                                                      Value query, Value key,
                                                      Value value, Value mask,
                                                      FloatAttr scale) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return error("query, key and value must have rank 4 "
                 "([batch, heads, length, head_dim])");
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return error("query, key and value must have one element type");
  auto check = [&](RankedTensorType a, int64_t da, RankedTensorType b,
                   int64_t db, StringRef what) -> LogicalResult {
    if (compatible(a.getDimSize(da), b.getDimSize(db)))
      return success();
    return error(what, " sizes ", a.getDimSize(da), " and ", b.getDimSize(db),
                 " differ");
  };
  if (failed(check(q, 0, k, 0, "query and key batch")) ||
      failed(check(q, 0, v, 0, "query and value batch")) ||
      failed(check(q, 1, k, 1, "query and key head")) ||
      failed(check(q, 1, v, 1, "query and value head")) ||
      failed(check(k, 2, v, 2, "key and value length")) ||
      failed(check(q, 3, k, 3, "query and key head_dim")))
    return failure();
  if (mask) {
    auto m = cast<RankedTensorType>(mask.getType());
    if (m.getRank() != 4 ||
        (m.getDimSize(0) != 1 &&
         !compatible(m.getDimSize(0), q.getDimSize(0))) ||
        (m.getDimSize(1) != 1 &&
         !compatible(m.getDimSize(1), q.getDimSize(1))) ||
        !compatible(m.getDimSize(2), q.getDimSize(2)) ||
        !compatible(m.getDimSize(3), k.getDimSize(2)))
      return error("mask of type ", m,
                   " must be [batch or 1, heads or 1, query length, key "
                   "length]");
  }
  if (scale && !(scale.getValueAsDouble() > 0.0))
    return error("scale must be positive, not ", scale.getValueAsDouble());
  return RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType());
}

/// Context-parallel attention (ring, Ulysses) spreads one sequence: it
/// attends no mask, and queries and keys have one length.
static LogicalResult checkContextParallel(const InferError &error,
                                          ContextParallelAttr contextParallel,
                                          IntegerAttr ulyssesShards,
                                          Value query, Value key, Value mask) {
  bool hybrid = contextParallel &&
                contextParallel.getValue() == ContextParallel::ulysses_ring;
  if (hybrid && !ulyssesShards)
    return error("with context_parallel = ulysses_ring needs ulysses_shards");
  if (!hybrid && ulyssesShards)
    return error("has ulysses_shards without context_parallel = "
                 "ulysses_ring");
  if (ulyssesShards && ulyssesShards.getInt() < 1)
    return error("has ulysses_shards = ", ulyssesShards.getInt(),
                 "; it must be positive");
  if (!contextParallel)
    return success();
  if (mask)
    return error("with context_parallel takes no mask");
  int64_t sq = cast<RankedTensorType>(query.getType()).getDimSize(2);
  int64_t skv = cast<RankedTensorType>(key.getType()).getDimSize(2);
  if (!compatible(sq, skv))
    return error("with context_parallel needs one sequence: query length ", sq,
                 " and key length ", skv, " differ");
  return success();
}

/// The log-sum-exp type of attention with output `out`: f32 `[B, H, Sq]`.
static RankedTensorType logSumExpType(RankedTensorType out) {
  return RankedTensorType::get(out.getShape().drop_back(),
                               Float32Type::get(out.getContext()));
}

/// The attention result type of a flash attention op, forward or backward,
/// after the checks of `sd.attention` and of its `context_parallel`.
template <typename Adaptor>
static FailureOr<RankedTensorType>
inferFlashAttentionType(const InferError &error, Adaptor adaptor) {
  FailureOr<RankedTensorType> out = inferAttentionType(
      error, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
      adaptor.getMask(), adaptor.getScaleAttr());
  if (failed(out) || failed(checkContextParallel(
                         error, adaptor.getContextParallelAttr(),
                         adaptor.getUlyssesShardsAttr(), adaptor.getQuery(),
                         adaptor.getKey(), adaptor.getMask())))
    return failure();
  return *out;
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> out = inferAttentionType(
      InferError(loc, getOperationName()), adaptor.getQuery(), adaptor.getKey(),
      adaptor.getValue(), adaptor.getMask(), adaptor.getScaleAttr());
  if (failed(out))
    return failure();
  types.push_back(*out);
  return success();
}

LogicalResult FlashAttentionOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  FailureOr<RankedTensorType> out = inferFlashAttentionType(error, adaptor);
  if (failed(out))
    return failure();
  types.push_back(*out);
  types.push_back(logSumExpType(*out));
  return success();
}

/// The cotangent types of a flash-attention backward op: `d_out` and `out`
/// like the attention result, f32 `[B, H, Sq]` log-sum-exp; then the types
/// of `cotangentsOf` (the query, or the key and the value).
template <typename Adaptor>
static LogicalResult
inferFlashBackwardTypes(const InferError &error, Adaptor adaptor,
                        ValueRange cotangentsOf, SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> out = inferFlashAttentionType(error, adaptor);
  if (failed(out))
    return failure();
  auto fits = [](Type a, RankedTensorType b) {
    auto t = cast<RankedTensorType>(a);
    return t.getElementType() == b.getElementType() &&
           t.getRank() == b.getRank() &&
           llvm::all_of(llvm::zip(t.getShape(), b.getShape()), [](auto p) {
             return compatible(std::get<0>(p), std::get<1>(p));
           });
  };
  if (!fits(adaptor.getOut().getType(), *out))
    return error("out of type ", adaptor.getOut().getType(),
                 " must have the attention result's type ", *out);
  if (!fits(adaptor.getDOut().getType(), *out))
    return error("d_out of type ", adaptor.getDOut().getType(),
                 " must have the attention result's type ", *out);
  RankedTensorType lse = logSumExpType(*out);
  if (!fits(adaptor.getLogsumexp().getType(), lse))
    return error("logsumexp of type ", adaptor.getLogsumexp().getType(),
                 " must be ", lse);
  for (Value operand : cotangentsOf)
    types.push_back(operand.getType());
  return success();
}

LogicalResult
FlashAttentionDqOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &types) {
  return inferFlashBackwardTypes(InferError(loc, getOperationName()), adaptor,
                                 {adaptor.getQuery()}, types);
}

LogicalResult FlashAttentionDkvOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferFlashBackwardTypes(InferError(loc, getOperationName()), adaptor,
                                 {adaptor.getKey(), adaptor.getValue()}, types);
}

FlashAttentionDkvOp FlashAttentionDqOp::getFusingDkv() {
  if (!getBlocks().getUseFusedBwdKernel())
    return {};
  for (Operation *user : getDOut().getUsers()) {
    auto dkv = dyn_cast<FlashAttentionDkvOp>(user);
    if (dkv && dkv->getBlock() == (*this)->getBlock() &&
        dkv->isBeforeInBlock(*this) &&
        dkv->getOperands() == (*this)->getOperands() &&
        dkv.getBlocks() == getBlocks() && dkv.getScaleAttr() == getScaleAttr())
      return dkv;
  }
  return {};
}

double AttentionOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  int64_t headDim = getQuery().getType().getDimSize(3);
  return 1.0 / std::sqrt(static_cast<double>(headDim));
}

/// The result type of a convolution of `x` by `w` (sd.conv2d's shape rules),
/// or an error through `error`.
static FailureOr<RankedTensorType>
inferConvResult(const InferError &error, RankedTensorType x, RankedTensorType w,
                ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                int64_t groups) {
  if (x.getRank() != 4 || w.getRank() != 4) {
    (void)error("input ([N, H, W, Cin]) and kernel ([KH, KW, Cin/groups, "
                "Cout]) must have rank 4");
    return failure();
  }
  if (x.getElementType() != w.getElementType()) {
    (void)error("input and kernel element types differ");
    return failure();
  }
  if (strides.size() != 2 ||
      llvm::any_of(strides, [](int64_t s) { return s <= 0; })) {
    (void)error("strides ", formatList(strides), " must be 2 positive numbers");
    return failure();
  }
  if (padding.size() != 4 ||
      llvm::any_of(padding, [](int64_t p) { return p < 0; })) {
    (void)error("padding ", formatList(padding),
                " must be 4 non-negative numbers [top, bottom, left, right]");
    return failure();
  }
  int64_t cin = x.getDimSize(3), cout = w.getDimSize(3);
  if (groups <= 0 || (!isDyn(cin) && cin % groups) ||
      (!isDyn(cout) && cout % groups)) {
    (void)error("groups = ", groups, " must be positive and divide Cin = ", cin,
                " and Cout = ", cout);
    return failure();
  }
  if (!isDyn(cin) && !compatible(w.getDimSize(2), cin / groups)) {
    (void)error("kernel input channels ", w.getDimSize(2),
                " must be Cin/groups = ", cin / groups);
    return failure();
  }
  SmallVector<int64_t> shape = {x.getDimSize(0), 0, 0, cout};
  for (int64_t i = 0; i < 2; ++i) {
    int64_t in = x.getDimSize(1 + i), k = w.getDimSize(i);
    int64_t padded = in + padding[2 * i] + padding[2 * i + 1];
    if (isDyn(in) || isDyn(k)) {
      shape[1 + i] = ShapedType::kDynamic;
      continue;
    }
    if (padded < k) {
      (void)error("padded input size ", padded, " is smaller than kernel ",
                  "size ", k);
      return failure();
    }
    shape[1 + i] = (padded - k) / strides[i] + 1;
  }
  return x.clone(shape);
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto x = cast<RankedTensorType>(adaptor.getInput().getType());
  FailureOr<RankedTensorType> result = inferConvResult(
      error, x, cast<RankedTensorType>(adaptor.getKernel().getType()),
      adaptor.getStrides(), adaptor.getPadding(),
      static_cast<int64_t>(adaptor.getGroups()));
  if (failed(result) ||
      failed(checkChannelOperand(error, "bias", adaptor.getBias(),
                                 result->getDimSize(3), x.getElementType())))
    return failure();
  types.push_back(*result);
  return success();
}

/// A convolution gradient's check: its forward input `x`, kernel `w` and
/// result `y` (one of them the gradient op's result) are those of an
/// sd.conv2d with the op's attributes. `names` say which operand or result
/// each one is, for the message.
template <typename OpTy>
static LogicalResult verifyConvGradient(OpTy op, RankedTensorType x,
                                        RankedTensorType w, Value y,
                                        StringRef yName) {
  InferError error(op.getLoc(), op->getName().getStringRef());
  auto yType = cast<RankedTensorType>(y.getType());
  FailureOr<RankedTensorType> expected =
      inferConvResult(error, x, w, op.getStrides(), op.getPadding(),
                      static_cast<int64_t>(op.getGroups()));
  if (failed(expected))
    return failure();
  if (yType.getRank() != 4 ||
      yType.getElementType() != expected->getElementType())
    return op.emitOpError() << yName << " " << yType
                            << " must be a rank-4 tensor of the input's "
                               "element type";
  for (int64_t d = 0; d < 4; ++d)
    if (!compatible(yType.getDimSize(d), expected->getDimSize(d)))
      return op.emitOpError()
             << yName << " " << yType << " is not the forward result "
             << *expected << " of this convolution";
  return success();
}

/// `result`'s type with a dynamic batch dimension taken from `source`'s
/// (sd-specialize-batch; the other dimensions are static).
static LogicalResult refineBatch(Operation *op, Value source, Value result,
                                 SmallVectorImpl<Type> &types) {
  auto type = cast<RankedTensorType>(result.getType());
  SmallVector<int64_t> shape(type.getShape());
  if (isDyn(shape[0]))
    shape[0] = cast<RankedTensorType>(source.getType()).getDimSize(0);
  if (llvm::any_of(shape, isDyn))
    return op->emitOpError("has result type ")
           << type << " whose only dynamic dimension may be the batch";
  types.push_back(type.clone(shape));
  return success();
}

LogicalResult
Conv2DInputGradOp::refineResultTypes(int64_t, SmallVectorImpl<Type> &types) {
  return refineBatch(*this, getResultGrad(), getInputGrad(), types);
}

LogicalResult
Conv2DFilterGradOp::refineResultTypes(int64_t, SmallVectorImpl<Type> &types) {
  // The kernel has no batch dimension.
  auto type = getKernelGrad().getType();
  if (!type.hasStaticShape())
    return emitOpError("has result type ")
           << type << ", which must be static (a kernel has no batch)";
  types.push_back(type);
  return success();
}

LogicalResult Conv2DInputGradOp::verify() {
  return verifyConvGradient(*this, getInputGrad().getType(),
                            getKernel().getType(), getResultGrad(),
                            "result_grad");
}

LogicalResult Conv2DFilterGradOp::verify() {
  // The filter gradient of bf16 operands may be f32: its products sum in
  // f32 (sd-widen-gradients keeps the sum unrounded for the reduction).
  RankedTensorType input = getInput().getType(),
                   kernel = getKernelGrad().getType();
  if (input.getElementType().isBF16() && kernel.getElementType().isF32())
    kernel = kernel.clone(input.getElementType());
  return verifyConvGradient(*this, input, kernel, getResultGrad(),
                            "result_grad");
}

LogicalResult
UpsampleNearestOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto type = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> scale = adaptor.getScale();
  if (type.getRank() != 4)
    return error("operand must have rank 4 ([N, H, W, C])");
  if (scale.size() != 2 ||
      llvm::any_of(scale, [](int64_t s) { return s <= 0; }))
    return error("scale ", formatList(scale), " must be 2 positive numbers");
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t i = 0; i < 2; ++i)
    if (!isDyn(shape[1 + i]))
      shape[1 + i] *= scale[i];
  types.push_back(type.clone(shape));
  return success();
}
