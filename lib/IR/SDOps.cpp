//===- SDOps.cpp - sd operations ------------------------------------------===//
//
// Result-type inference and verifiers. Inference doubles as verification for
// ops with InferTypeOpInterface: it reports each broken constraint through
// the op's location before the inferred and declared types are compared.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::sd;

#include "sd/IR/SDInterfaces.cpp.inc"

namespace {
/// Emits `'sd.op' op <message>` at an optional location, like emitOpError
/// does for an op that already exists.
class InferError {
public:
  InferError(std::optional<Location> loc, StringRef opName)
      : loc(loc), opName(opName) {}
  template <typename... Args>
  LogicalResult operator()(Args &&...args) const {
    return emitOptionalError(loc, "'", opName, "' op ",
                             std::forward<Args>(args)...);
  }

private:
  std::optional<Location> loc;
  StringRef opName;
};
} // namespace

static bool isDyn(int64_t size) { return ShapedType::isDynamic(size); }

/// Two sizes that may be equal once dynamic ones are known.
static bool compatible(int64_t a, int64_t b) {
  return isDyn(a) || isDyn(b) || a == b;
}

static std::string formatList(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (auto [i, v] : llvm::enumerate(values))
    text += (i ? ", " : "") + (isDyn(v) ? std::string("?") : std::to_string(v));
  return text + "]";
}

LogicalResult
mlir::sd::verifyTensorSize(Type type,
                           function_ref<InFlightDiagnostic()> emitValueError) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return success();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t elements = 1;
  for (int64_t size : tensorType.getShape())
    if (!isDyn(size) && llvm::MulOverflow(elements, size, elements))
      return emitValueError()
             << " of type " << type << " has more than " << kMax << " elements";
  Type elementType = tensorType.getElementType();
  int64_t elementBytes =
      elementType.isIntOrFloat()
          ? llvm::divideCeil(elementType.getIntOrFloatBitWidth(), 8)
          : 1;
  int64_t bytes;
  if (llvm::MulOverflow(elements, elementBytes, bytes))
    return emitValueError() << " of type " << type << " has " << elements
                            << " elements, more than " << kMax << " bytes";
  return success();
}

LogicalResult mlir::sd::verifyTensorSizesFit(Operation *op) {
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(verifyTensorSize(
            type, [&] { return op->emitOpError("operand #") << index; })))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(verifyTensorSize(
            type, [&] { return op->emitOpError("result #") << index; })))
      return failure();
  return success();
}

/// Checks that `dims` are distinct and in `[0, rank)`; `what` names them.
static LogicalResult checkDimList(const InferError &error, StringRef what,
                                  ArrayRef<int64_t> dims, int64_t rank) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      return error(what, " ", formatList(dims),
                   " has a dimension out of range for rank ", rank);
    if (!seen.insert(d).second)
      return error(what, " ", formatList(dims), " lists dimension ", d,
                   " twice");
  }
  return success();
}

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
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult mlir::sd::inferReduceType(StringRef opName,
                                        std::optional<Location> loc,
                                        Type operandType,
                                        ArrayRef<int64_t> dims,
                                        SmallVectorImpl<Type> &types) {
  InferError error(loc, opName);
  auto type = cast<RankedTensorType>(operandType);
  if (failed(checkDimList(error, "dims", dims, type.getRank())))
    return failure();
  if (!llvm::is_sorted(dims))
    return error("dims ", formatList(dims), " must be sorted ascending");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(type.getDimSize(d));
  types.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location>,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto type = cast<RankedTensorType>(adaptor.getLhs().getType());
  types.push_back(type.clone(IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getOnTrue().getType());
  return success();
}

LogicalResult SelectOp::verify() {
  auto predType = cast<RankedTensorType>(getPred().getType());
  auto type = cast<RankedTensorType>(getOnTrue().getType());
  if (failed(verifyCompatibleShape(predType, type)))
    return emitOpError("predicate shape ")
           << formatList(predType.getShape())
           << " differs from the operands' shape "
           << formatList(type.getShape());
  return success();
}

LogicalResult ConvertOp::refineResultTypes(int64_t,
                                           SmallVectorImpl<Type> &types) {
  auto type = cast<RankedTensorType>(getOperand().getType());
  types.push_back(type.clone(getResult().getType().getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  auto operandType = getOperand().getType();
  auto resultType = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  if (operandType.getElementType() != resultType.getElementType())
    return emitOpError("element type ")
           << resultType.getElementType() << " differs from the operand's "
           << operandType.getElementType();
  if (static_cast<int64_t>(dims.size()) != operandType.getRank())
    return emitOpError("dims ")
           << formatList(dims) << " must have one entry per operand dimension ("
           << operandType.getRank() << ")";
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= resultType.getRank())
      return emitOpError("dims ") << formatList(dims)
                                  << " has a dimension out of range for rank "
                                  << resultType.getRank();
    if (i > 0 && dims[i - 1] >= d)
      return emitOpError("dims ")
             << formatList(dims) << " must be strictly increasing";
    int64_t from = operandType.getDimSize(i), to = resultType.getDimSize(d);
    if (from != 1 && !compatible(from, to))
      return emitOpError("operand dimension ")
             << i << " of size " << from << " cannot broadcast to size " << to;
  }
  return success();
}

LogicalResult
BroadcastInDimOp::refineResultTypes(int64_t batch,
                                    SmallVectorImpl<Type> &types) {
  auto operandType = getOperand().getType();
  auto resultType = getResult().getType();
  SmallVector<int64_t> shape(resultType.getShape());
  for (auto [i, d] : llvm::enumerate(getDims()))
    if (isDyn(shape[d]) && operandType.getDimSize(i) != 1)
      shape[d] = operandType.getDimSize(i);
  // The only dynamic dimension of sd programs is the batch: one that the
  // broadcast creates (e.g. a bias broadcast to [batch, features]) is it.
  for (int64_t &d : shape)
    if (isDyn(d) && batch > 0)
      d = batch;
  if (llvm::any_of(shape, isDyn))
    return emitOpError("cannot determine dynamic result dimensions of ")
           << resultType << " from operand " << operandType;
  types.push_back(resultType.clone(shape));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto operandType = getOperand().getType();
  auto resultType = getResult().getType();
  if (operandType.getElementType() != resultType.getElementType())
    return emitOpError("element type ")
           << resultType.getElementType() << " differs from the operand's "
           << operandType.getElementType();
  if (llvm::count_if(resultType.getShape(), isDyn) > 1)
    return emitOpError("result type ")
           << resultType << " has more than one dynamic dimension";
  if (operandType.hasStaticShape() && resultType.hasStaticShape() &&
      operandType.getNumElements() != resultType.getNumElements())
    return emitOpError("cannot reshape ")
           << operandType << " (" << operandType.getNumElements()
           << " elements) into " << resultType << " ("
           << resultType.getNumElements() << " elements)";
  return success();
}

LogicalResult ReshapeOp::refineResultTypes(int64_t,
                                           SmallVectorImpl<Type> &types) {
  auto operandType = getOperand().getType();
  auto resultType = getResult().getType();
  if (resultType.hasStaticShape()) {
    types.push_back(resultType);
    return success();
  }
  if (!operandType.hasStaticShape())
    return emitOpError("cannot infer the dynamic dimension of ")
           << resultType << " from " << operandType;
  int64_t known = 1;
  for (int64_t d : resultType.getShape())
    if (!isDyn(d))
      known *= d;
  if (known == 0 || operandType.getNumElements() % known != 0)
    return emitOpError("cannot reshape ")
           << operandType << " into " << resultType;
  SmallVector<int64_t> shape(resultType.getShape());
  for (int64_t &d : shape)
    if (isDyn(d))
      d = operandType.getNumElements() / known;
  types.push_back(resultType.clone(shape));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto type = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  // One message for a wrong length, an out-of-range or a repeated entry.
  SmallVector<bool> seen(type.getRank(), false);
  bool isPermutation =
      static_cast<int64_t>(perm.size()) == type.getRank() &&
      llvm::all_of(perm, [&](int64_t p) {
        if (p < 0 || p >= type.getRank() || seen[p])
          return false;
        seen[p] = true;
        return true;
      });
  if (!isPermutation)
    return error("permutation ", formatList(perm),
                 " is not a permutation of rank ", type.getRank());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  types.push_back(type.clone(shape));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto type = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    strides = adaptor.getStrides();
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(start.size()) != rank ||
      static_cast<int64_t>(limit.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return error("start, limit and strides need ", rank,
                 " entries each (one per dimension)");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = type.getDimSize(d);
    if (isDyn(size)) {
      if (start[d] != 0 || limit[d] != -1 || strides[d] != 1)
        return error("dynamic dimension ", d,
                     " must be taken whole (start 0, limit -1, stride 1)");
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    if (strides[d] <= 0)
      return error("stride ", strides[d], " of dimension ", d,
                   " must be positive");
    // A limit of -1 is the end of the dimension (so a whole batch dimension
    // stays valid once sd-specialize-batch makes it static).
    int64_t lim = limit[d] == -1 ? size : limit[d];
    if (start[d] < 0 || start[d] > lim || lim > size)
      return error("slice [", start[d], ", ", limit[d], ") of dimension ", d,
                   " is out of bounds for size ", size);
    shape.push_back((lim - start[d] + strides[d] - 1) / strides[d]);
  }
  types.push_back(type.clone(shape));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  if (adaptor.getInputs().empty())
    return error("needs at least one input");
  auto first = cast<RankedTensorType>(adaptor.getInputs().front().getType());
  int64_t dim = static_cast<int64_t>(adaptor.getDim());
  if (dim < 0 || dim >= first.getRank())
    return error("dim ", dim, " is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, input] : llvm::enumerate(adaptor.getInputs().drop_front())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return error("input #", i + 1, " of type ", type,
                   " does not match the rank and element type of ", first);
    for (int64_t d = 0; d < first.getRank(); ++d) {
      if (d == dim) {
        shape[d] = isDyn(shape[d]) || type.isDynamicDim(d)
                       ? ShapedType::kDynamic
                       : shape[d] + type.getDimSize(d);
      } else if (!compatible(shape[d], type.getDimSize(d))) {
        return error("input #", i + 1, " has size ", type.getDimSize(d),
                     " in dimension ", d, " where input #0 has ", shape[d]);
      }
    }
  }
  types.push_back(first.clone(shape));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  InferError error(loc, getOperationName());
  auto type = cast<RankedTensorType>(adaptor.getOperand().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != type.getRank() ||
      static_cast<int64_t>(high.size()) != type.getRank())
    return error("low and high need ", type.getRank(),
                 " entries each (one per dimension)");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return error("padding of dimension ", d, " must not be negative");
    int64_t size = type.getDimSize(d);
    shape.push_back(isDyn(size) ? size : low[d] + size + high[d]);
  }
  types.push_back(type.clone(shape));
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

bool mlir::sd::isInferredOrF32(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  auto want = cast<RankedTensorType>(inferred.front());
  auto have = dyn_cast<RankedTensorType>(actual.front());
  return have && want.getShape() == have.getShape() &&
         (have.getElementType() == want.getElementType() ||
          have.getElementType().isF32());
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
                          adaptor.getScale(), Value(),
                          adaptor.getEpsilonAttr(), types);
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
    return emitOpError("dim ") << dim << " is out of range for rank "
                               << getType().getRank();
  return success();
}

/// The attention output type `[B, H, Sq, Dv]` of query, key, value and the
/// optional mask, after the checks every attention op shares.
static FailureOr<RankedTensorType>
inferAttentionType(const InferError &error, Value query, Value key,
                   Value value, Value mask, FloatAttr scale) {
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
        (m.getDimSize(0) != 1 && !compatible(m.getDimSize(0), q.getDimSize(0))) ||
        (m.getDimSize(1) != 1 && !compatible(m.getDimSize(1), q.getDimSize(1))) ||
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
    return error("with context_parallel needs one sequence: query length ",
                 sq, " and key length ", skv, " differ");
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
  if (failed(out) ||
      failed(checkContextParallel(error, adaptor.getContextParallelAttr(),
                                  adaptor.getUlyssesShardsAttr(),
                                  adaptor.getQuery(), adaptor.getKey(),
                                  adaptor.getMask())))
    return failure();
  return *out;
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> out = inferAttentionType(
      InferError(loc, getOperationName()), adaptor.getQuery(),
      adaptor.getKey(), adaptor.getValue(), adaptor.getMask(),
      adaptor.getScaleAttr());
  if (failed(out))
    return failure();
  types.push_back(*out);
  return success();
}

LogicalResult FlashAttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
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
static LogicalResult inferFlashBackwardTypes(const InferError &error,
                                             Adaptor adaptor,
                                             ValueRange cotangentsOf,
                                             SmallVectorImpl<Type> &types) {
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

LogicalResult FlashAttentionDqOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferFlashBackwardTypes(InferError(loc, getOperationName()), adaptor,
                                 {adaptor.getQuery()}, types);
}

LogicalResult FlashAttentionDkvOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferFlashBackwardTypes(InferError(loc, getOperationName()), adaptor,
                                 {adaptor.getKey(), adaptor.getValue()},
                                 types);
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
static LogicalResult verifyConvGradient(OpTy op, Value x, Value w, Value y,
                                        StringRef yName) {
  InferError error(op.getLoc(), op->getName().getStringRef());
  auto yType = cast<RankedTensorType>(y.getType());
  FailureOr<RankedTensorType> expected =
      inferConvResult(error, cast<RankedTensorType>(x.getType()),
                      cast<RankedTensorType>(w.getType()), op.getStrides(),
                      op.getPadding(), static_cast<int64_t>(op.getGroups()));
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
  return verifyConvGradient(*this, getInputGrad(), getKernel(), getResultGrad(),
                            "result_grad");
}

LogicalResult Conv2DFilterGradOp::verify() {
  return verifyConvGradient(*this, getInput(), getKernelGrad(), getResultGrad(),
                            "result_grad");
}

LogicalResult UpsampleNearestOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
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

//===----------------------------------------------------------------------===//
// Constants and random numbers
//===----------------------------------------------------------------------===//

/// Ops that create values from nothing need a static type.
static LogicalResult verifyStatic(Operation *op, Type type) {
  if (!cast<RankedTensorType>(type).hasStaticShape())
    return op->emitOpError("result type ") << type << " must be static";
  return success();
}

LogicalResult ConstantOp::verify() {
  return verifyStatic(*this, getType());
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

LogicalResult IotaOp::verify() {
  if (failed(verifyStatic(*this, getType())))
    return failure();
  int64_t dim = getDim();
  if (dim < 0 || dim >= getType().getRank())
    return emitOpError("dim ") << dim << " is out of range for rank "
                               << getType().getRank();
  return success();
}

/// The offsets form of the rng ops: offsets and global_shape together, one
/// per dimension, and the global shape holds the result.
static LogicalResult verifyRngOffsets(Operation *op, RankedTensorType type,
                                      size_t numOffsets,
                                      std::optional<ArrayRef<int64_t>> global) {
  if (numOffsets == 0 && !global)
    return success();
  auto rank = static_cast<size_t>(type.getRank());
  if (numOffsets != rank || !global || global->size() != rank)
    return op->emitOpError("offsets form needs one offset and one "
                           "global_shape entry per dimension (rank ")
           << rank << "), not " << numOffsets << " and "
           << (global ? global->size() : 0);
  for (size_t dim = 0; dim < rank; ++dim)
    if ((*global)[dim] < type.getDimSize(dim))
      return op->emitOpError("global_shape dimension ")
             << dim << " of size " << (*global)[dim]
             << " is smaller than the result's " << type.getDimSize(dim);
  return success();
}

LogicalResult RngNormalOp::verify() {
  if (failed(verifyStatic(*this, getType())) ||
      failed(verifyRngOffsets(*this, getType(), getOffsets().size(),
                              getGlobalShape())))
    return failure();
  if (!(getStddev().convertToDouble() > 0.0))
    return emitOpError("stddev must be positive, not ")
           << getStddev().convertToDouble();
  return success();
}

LogicalResult RngUniformOp::verify() {
  if (failed(verifyStatic(*this, getType())) ||
      failed(verifyRngOffsets(*this, getType(), getOffsets().size(),
                              getGlobalShape())))
    return failure();
  if (!(getLow().convertToDouble() < getHigh().convertToDouble()))
    return emitOpError("low (")
           << getLow().convertToDouble() << ") must be below high ("
           << getHigh().convertToDouble() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Loss and sharding annotations
//===----------------------------------------------------------------------===//

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location>, Adaptor,
                                          SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

LogicalResult ShardingConstraintOp::verify() {
  if (!getShardingAttr() && !getLogicalAttr())
    return emitOpError("needs a sharding or logical axes");
  if (LogicalAxesAttr logical = getLogicalAttr())
    if (logical.getRank() != getType().getRank())
      return emitOpError("logical axes name ")
             << logical.getRank() << " dimensions but the type is "
             << getType();
  return success();
}

LogicalResult
ShardingConstraintOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ShardingAttr sharding = getShardingAttr();
  if (!sharding)
    return success();
  auto emit = [&] { return emitOpError(); };
  MeshAttr mesh = lookupMesh(*this, sharding.getMeshName(), emit);
  if (!mesh)
    return failure();
  return sharding.verifyFor(getType(), mesh, "the constrained value", emit);
}

//===----------------------------------------------------------------------===//
// Memory moves
//===----------------------------------------------------------------------===//

LogicalResult ReloadOp::verify() {
  if (!getOperand().getDefiningOp<OffloadOp>())
    return emitOpError("reloads a value that no sd.offload produced");
  return success();
}

MeshAttr mlir::sd::lookupMesh(Operation *from, FlatSymbolRefAttr meshName,
                              function_ref<InFlightDiagnostic()> emitError) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, meshName);
  if (!mesh) {
    emitError() << "sharding refers to " << meshName
                << ", which is not an sd.mesh";
    return {};
  }
  return mesh.getMesh();
}

#define GET_OP_CLASSES
#include "sd/IR/SDOps.cpp.inc"

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
