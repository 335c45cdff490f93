//===- SDOps.cpp - sd operations ------------------------------------------===//
//
// Result-type inference and verifiers of the elementwise, reduction, shape,
// constant, random-number, annotation and memory ops, the checks every sd op
// shares, and the generated definitions of the ops and interfaces. Inference
// doubles as verification for ops with InferTypeOpInterface: it reports each
// broken constraint through the op's location before the inferred and
// declared types are compared. The layer ops are in SDLayerOps.cpp, the
// collectives in SDCollectiveOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "SDOpsHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::ops_detail;

#include "sd/IR/SDInterfaces.cpp.inc"

std::string ops_detail::formatList(ArrayRef<int64_t> values) {
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

LogicalResult ops_detail::checkDimList(const InferError &error, StringRef what,
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

bool mlir::sd::isInferredOrF32(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  auto want = cast<RankedTensorType>(inferred.front());
  auto have = dyn_cast<RankedTensorType>(actual.front());
  return have && want.getShape() == have.getShape() &&
         (have.getElementType() == want.getElementType() ||
          have.getElementType().isF32());
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

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

std::array<Value, 3> AdamWOp::decompose(OpBuilder &builder) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(*this);
  Location loc = getLoc();
  auto type = cast<RankedTensorType>(getParam().getType());
  Type element = type.getElementType();
  // A scalar as a tensor of the parameter's type: a splat constant where
  // it is one, else converted to the element type and broadcast.
  auto spread = [&](Value scalar) -> Value {
    if (auto constant = scalar.getDefiningOp<ConstantOp>())
      if (auto splat = dyn_cast<SplatElementsAttr>(constant.getValue())) {
        double value = splat.getSplatValue<APFloat>().convertToDouble();
        return ConstantOp::create(
            builder, loc,
            cast<ElementsAttr>(DenseElementsAttr::get(
                type, builder.getFloatAttr(element, value).getValue())));
      }
    if (!element.isF32())
      scalar = ConvertOp::create(builder, loc, type.clone(ArrayRef<int64_t>{}),
                                 scalar);
    if (type.getRank() == 0)
      return scalar;
    return BroadcastInDimOp::create(builder, loc, type, scalar,
                                    ArrayRef<int64_t>{});
  };
  auto mul = [&](Value a, Value b) -> Value {
    return MulOp::create(builder, loc, a, b);
  };
  auto add = [&](Value a, Value b) -> Value {
    return AddOp::create(builder, loc, a, b);
  };
  auto div = [&](Value a, Value b) -> Value {
    return DivOp::create(builder, loc, a, b);
  };
  // One op per statement, so that the order of the ops is the program's
  // and not the C++ compiler's choice of argument order.
  Value g = getGrad();
  Value b1 = spread(getBeta1());
  Value oneMinusB1 = spread(getOneMinusBeta1());
  Value keptMu = mul(b1, getMu());
  Value newMu = mul(oneMinusB1, g);
  Value m = add(keptMu, newMu);
  Value b2 = spread(getBeta2());
  Value oneMinusB2 = spread(getOneMinusBeta2());
  Value keptNu = mul(b2, getNu());
  Value square = mul(g, g);
  Value newNu = mul(oneMinusB2, square);
  Value v = add(keptNu, newNu);
  Value c1 = spread(getCorrection1());
  Value mHat = div(m, c1);
  Value c2 = spread(getCorrection2());
  Value vHat = div(v, c2);
  Value root = SqrtOp::create(builder, loc, vHat);
  Value eps = spread(getEpsilon());
  Value denominator = add(root, eps);
  Value direction = div(mHat, denominator);
  if (Value decay = getWeightDecay()) {
    Value wd = spread(decay);
    Value decayTerm = mul(wd, getParam());
    direction = add(direction, decayTerm);
  }
  Value lr = spread(getLearningRate());
  Value step = mul(lr, direction);
  Value p = SubOp::create(builder, loc, getParam(), step);
  return {p, m, v};
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
