//===- EvaluableOps.cpp - reference evaluation of each sd op --------------===//
//
// One small `evalOp` overload per op reads the op's attributes and calls the
// matching reference kernel; a template external model forwards
// `EvaluableOpInterface::evaluate` to it, and `registerEvaluatorInterfaces`
// attaches the model to every op at once. Results are left unrounded and
// may carry the kernel's natural element type: the driver retags and rounds.
//
//===----------------------------------------------------------------------===//

#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/Evaluator/Evaluator.h"
#include "sd/IR/SDOps.h"
#include "sd/Reference/Kernels.h"
#include "sd/Reference/Random.h"

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::sd;

namespace ref = ::sd::ref;
using ref::Tensor;

#include "sd/Evaluator/EvaluableOpInterface.cpp.inc"

namespace {
using Operands = ArrayRef<const Tensor *>;
using Results = SmallVectorImpl<Tensor>;
} // namespace

static std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return {values.begin(), values.end()};
}

/// The static shape of `value`'s ranked tensor type (the driver has checked
/// that it is static before evaluating the op).
static std::vector<int64_t> shapeOf(Value value) {
  return toVector(cast<RankedTensorType>(value.getType()).getShape());
}

/// The reference element type of `value`'s tensor type (the driver has
/// checked that there is one; F64 is never reached).
static ref::DType dtypeOf(Value value) {
  FailureOr<ref::DType> dtype = getReferenceDType(
      cast<RankedTensorType>(value.getType()).getElementType());
  return succeeded(dtype) ? *dtype : ref::DType::F64;
}

/// The tensor of the ODS operand group `odsIndex` when that optional operand
/// is present, else null.
template <typename OpTy>
static const Tensor *optionalOperand(OpTy op, unsigned odsIndex,
                                     Operands operands) {
  auto [start, length] = op.getODSOperandIndexAndLength(odsIndex);
  return length ? operands[start] : nullptr;
}

static LogicalResult produce(Results &results, Tensor tensor) {
  results.push_back(std::move(tensor));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult unaryOp(ref::UnaryKind kind, Operands operands,
                             Results &results) {
  return produce(results, ref::unary(kind, *operands[0]));
}

static LogicalResult evalOp(NegOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Neg, o, r);
}
static LogicalResult evalOp(ExpOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Exp, o, r);
}
static LogicalResult evalOp(LogOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Log, o, r);
}
static LogicalResult evalOp(SqrtOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Sqrt, o, r);
}
static LogicalResult evalOp(RsqrtOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Rsqrt, o, r);
}
static LogicalResult evalOp(TanhOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Tanh, o, r);
}
static LogicalResult evalOp(SinOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Sin, o, r);
}
static LogicalResult evalOp(CosOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Cos, o, r);
}
static LogicalResult evalOp(SigmoidOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Sigmoid, o, r);
}
static LogicalResult evalOp(SiluOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Silu, o, r);
}
static LogicalResult evalOp(ErfOp, Operands o, Results &r) {
  return unaryOp(ref::UnaryKind::Erf, o, r);
}
static LogicalResult evalOp(GeluOp op, Operands o, Results &r) {
  return produce(r, ref::gelu(*o[0], op.getApproximate()));
}

static LogicalResult binaryOp(ref::BinaryKind kind, Operands operands,
                              Results &results) {
  return produce(results, ref::binary(kind, *operands[0], *operands[1]));
}

static LogicalResult evalOp(AddOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Add, o, r);
}
static LogicalResult evalOp(SubOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Sub, o, r);
}
static LogicalResult evalOp(MulOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Mul, o, r);
}
static LogicalResult evalOp(DivOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Div, o, r);
}
static LogicalResult evalOp(MaxOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Max, o, r);
}
static LogicalResult evalOp(MinOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Min, o, r);
}
static LogicalResult evalOp(PowOp, Operands o, Results &r) {
  return binaryOp(ref::BinaryKind::Pow, o, r);
}

static ref::CompareKind toCompareKind(CompareDirection direction) {
  switch (direction) {
  case CompareDirection::eq:
    return ref::CompareKind::EQ;
  case CompareDirection::ne:
    return ref::CompareKind::NE;
  case CompareDirection::lt:
    return ref::CompareKind::LT;
  case CompareDirection::le:
    return ref::CompareKind::LE;
  case CompareDirection::gt:
    return ref::CompareKind::GT;
  case CompareDirection::ge:
    return ref::CompareKind::GE;
  }
  llvm_unreachable("unknown compare direction");
}

static LogicalResult evalOp(CompareOp op, Operands o, Results &r) {
  return produce(r,
                 ref::compare(toCompareKind(op.getDirection()), *o[0], *o[1]));
}
static LogicalResult evalOp(SelectOp, Operands o, Results &r) {
  return produce(r, ref::select(*o[0], *o[1], *o[2]));
}
/// The conversion itself; rounding to the target type is the driver's
/// (Native mode only).
static LogicalResult evalOp(ConvertOp op, Operands o, Results &r) {
  return produce(r, ref::convert(*o[0], dtypeOf(op.getResult())));
}

//===----------------------------------------------------------------------===//
// Reductions and shape manipulation
//===----------------------------------------------------------------------===//

static LogicalResult evalOp(ReduceSumOp op, Operands o, Results &r) {
  return produce(
      r, ref::reduce(ref::ReduceKind::Sum, *o[0], toVector(op.getDims())));
}
static LogicalResult evalOp(ReduceMaxOp op, Operands o, Results &r) {
  return produce(
      r, ref::reduce(ref::ReduceKind::Max, *o[0], toVector(op.getDims())));
}
static LogicalResult evalOp(ReduceMeanOp op, Operands o, Results &r) {
  return produce(
      r, ref::reduce(ref::ReduceKind::Mean, *o[0], toVector(op.getDims())));
}
static LogicalResult evalOp(BroadcastInDimOp op, Operands o, Results &r) {
  return produce(r, ref::broadcastInDim(*o[0], shapeOf(op.getResult()),
                                        toVector(op.getDims())));
}
static LogicalResult evalOp(ReshapeOp op, Operands o, Results &r) {
  return produce(r, ref::reshape(*o[0], shapeOf(op.getResult())));
}
static LogicalResult evalOp(TransposeOp op, Operands o, Results &r) {
  return produce(r, ref::transpose(*o[0], toVector(op.getPermutation())));
}
static LogicalResult evalOp(SliceOp op, Operands o, Results &r) {
  // A limit of -1 is the end of the dimension.
  std::vector<int64_t> limit = toVector(op.getLimit());
  for (size_t d = 0; d < limit.size(); ++d)
    if (limit[d] == -1)
      limit[d] = o[0]->dim(static_cast<int64_t>(d));
  return produce(r, ref::slice(*o[0], toVector(op.getStart()), limit,
                               toVector(op.getStrides())));
}
static LogicalResult evalOp(ConcatOp op, Operands o, Results &r) {
  std::vector<const Tensor *> inputs(o.begin(), o.end());
  return produce(r, ref::concat(inputs, static_cast<int64_t>(op.getDim())));
}
static LogicalResult evalOp(PadOp op, Operands o, Results &r) {
  return produce(r,
                 ref::pad(*o[0], toVector(op.getLow()), toVector(op.getHigh()),
                          op.getPaddingValue().convertToDouble()));
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, attention, convolution
//===----------------------------------------------------------------------===//

static LogicalResult evalOp(DotGeneralOp op, Operands o, Results &r) {
  return produce(r, ref::dotGeneral(*o[0], *o[1], toVector(op.getLhsBatch()),
                                    toVector(op.getRhsBatch()),
                                    toVector(op.getLhsContract()),
                                    toVector(op.getRhsContract())));
}
static LogicalResult evalOp(LayerNormOp op, Operands o, Results &r) {
  return produce(r, ref::layerNorm(*o[0], optionalOperand(op, 1, o),
                                   optionalOperand(op, 2, o),
                                   op.getEpsilon().convertToDouble()));
}
static LogicalResult evalOp(RmsNormOp op, Operands o, Results &r) {
  return produce(r, ref::rmsNorm(*o[0], optionalOperand(op, 1, o),
                                 op.getEpsilon().convertToDouble()));
}
static LogicalResult evalOp(GroupNormOp op, Operands o, Results &r) {
  return produce(r, ref::groupNorm(*o[0], optionalOperand(op, 1, o),
                                   optionalOperand(op, 2, o),
                                   static_cast<int64_t>(op.getNumGroups()),
                                   op.getEpsilon().convertToDouble()));
}
static LogicalResult evalOp(SoftmaxOp op, Operands o, Results &r) {
  return produce(r, ref::softmax(*o[0], static_cast<int64_t>(op.getDim())));
}
static LogicalResult evalOp(AttentionOp op, Operands o, Results &r) {
  return produce(r,
                 ref::attention(*o[0], *o[1], *o[2], optionalOperand(op, 3, o),
                                op.getEffectiveScale()));
}
/// The reference's block sizes of `blocks`.
static ref::FlashBlockSizes blockSizes(FlashBlocksAttr blocks) {
  ref::FlashBlockSizes sizes;
  sizes.blockQ = blocks.getBlockQ();
  sizes.blockKvCompute = blocks.getBlockKvCompute();
  sizes.blockKv = blocks.getBlockKv();
  sizes.blockQDkv = blocks.getBlockQDkv();
  sizes.blockKvDkv = blocks.getBlockKvDkv();
  sizes.blockKvDkvCompute = blocks.getBlockKvDkvCompute();
  sizes.blockQDq = blocks.getBlockQDq();
  sizes.blockKvDq = blocks.getBlockKvDq();
  sizes.fusedBackward = blocks.getUseFusedBwdKernel();
  return sizes;
}
static LogicalResult evalOp(FlashAttentionOp op, Operands o, Results &r) {
  ref::FlashForward forward = ref::flashAttention(
      *o[0], *o[1], *o[2], optionalOperand(op, 3, o),
      op.getScale().convertToDouble(), blockSizes(op.getBlocks()));
  r.push_back(std::move(forward.out));
  r.push_back(std::move(forward.lse));
  return success();
}
template <typename OpTy>
static ref::FlashGradients flashBackward(OpTy op, Operands o) {
  return ref::flashAttentionBackward(
      *o[0], *o[1], *o[2], optionalOperand(op, 6, o), *o[3], *o[4], *o[5],
      op.getScale().convertToDouble(), blockSizes(op.getBlocks()));
}
static LogicalResult evalOp(FlashAttentionDqOp op, Operands o, Results &r) {
  return produce(r, std::move(flashBackward(op, o).dq));
}
static LogicalResult evalOp(FlashAttentionDkvOp op, Operands o, Results &r) {
  ref::FlashGradients grads = flashBackward(op, o);
  r.push_back(std::move(grads.dk));
  r.push_back(std::move(grads.dv));
  return success();
}
/// A convolution op's strides and padding as the reference kernels take them.
template <typename OpTy>
static std::pair<std::array<int64_t, 2>, std::array<int64_t, 4>>
convGeometry(OpTy op) {
  ArrayRef<int64_t> s = op.getStrides(), p = op.getPadding();
  return {{s[0], s[1]}, {p[0], p[1], p[2], p[3]}};
}
static LogicalResult evalOp(Conv2DOp op, Operands o, Results &r) {
  auto [strides, padding] = convGeometry(op);
  return produce(r,
                 ref::conv2d(*o[0], *o[1], optionalOperand(op, 2, o), strides,
                             padding, static_cast<int64_t>(op.getGroups())));
}
static LogicalResult evalOp(Conv2DInputGradOp op, Operands o, Results &r) {
  auto [strides, padding] = convGeometry(op);
  return produce(
      r, ref::conv2dInputGrad(*o[0], *o[1], shapeOf(op.getInputGrad()), strides,
                              padding, static_cast<int64_t>(op.getGroups())));
}
static LogicalResult evalOp(Conv2DFilterGradOp op, Operands o, Results &r) {
  auto [strides, padding] = convGeometry(op);
  return produce(r, ref::conv2dFilterGrad(
                        *o[0], *o[1], shapeOf(op.getKernelGrad()), strides,
                        padding, static_cast<int64_t>(op.getGroups())));
}
static LogicalResult evalOp(UpsampleNearestOp op, Operands o, Results &r) {
  ArrayRef<int64_t> scale = op.getScale();
  return produce(r, ref::upsampleNearest(*o[0], scale[0], scale[1]));
}

//===----------------------------------------------------------------------===//
// Constants, random numbers, loss, annotations
//===----------------------------------------------------------------------===//

static double toDouble(APFloat value) {
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

static LogicalResult evalOp(ConstantOp op, Operands, Results &r) {
  ElementsAttr attr = op.getValue();
  Value result = op.getResult();
  std::vector<int64_t> shape = shapeOf(result);
  ref::DType dtype = dtypeOf(result);
  auto values = attr.tryGetValues<APFloat>();
  if (!values)
    return op.emitOpError("has a value the reference evaluator cannot read "
                          "as floats: ")
           << attr;
  // A splat holds one value, however large the tensor.
  if (attr.isSplat())
    return produce(r, Tensor(shape, dtype, toDouble(*values->begin())));
  std::vector<double> data;
  data.reserve(attr.getNumElements());
  for (APFloat value : *values)
    data.push_back(toDouble(value));
  return produce(r, Tensor(shape, dtype, std::move(data)));
}
static LogicalResult evalOp(IotaOp op, Operands, Results &r) {
  return produce(r, ref::iota(shapeOf(op.getResult()),
                              static_cast<int64_t>(op.getDim()),
                              dtypeOf(op.getResult())));
}
/// The block offsets of an rng op's offsets form, checked to be whole
/// numbers that keep the block inside the global shape.
template <typename OpTy>
static FailureOr<std::vector<int64_t>> rngOffsets(OpTy op, Operands o) {
  std::vector<int64_t> offsets, local = shapeOf(op.getResult());
  ArrayRef<int64_t> global = *op.getGlobalShape();
  for (auto [dim, tensor] : llvm::enumerate(o)) {
    double value = (*tensor)[0];
    auto offset = static_cast<int64_t>(value);
    if (static_cast<double>(offset) != value || offset < 0 ||
        offset + local[dim] > global[dim])
      return op.emitOpError("offset ")
             << value << " of dimension " << dim
             << " does not place the block inside the global shape";
    offsets.push_back(offset);
  }
  return offsets;
}

static LogicalResult evalOp(RngNormalOp op, Operands o, Results &r) {
  double mean = op.getMean().convertToDouble();
  double stddev = op.getStddev().convertToDouble();
  if (o.empty())
    return produce(r, ref::rngNormal(shapeOf(op.getResult()), op.getSeed(),
                                     mean, stddev, dtypeOf(op.getResult())));
  FailureOr<std::vector<int64_t>> offsets = rngOffsets(op, o);
  if (failed(offsets))
    return failure();
  return produce(r, ref::rngNormalSlice(toVector(*op.getGlobalShape()),
                                        *offsets, shapeOf(op.getResult()),
                                        op.getSeed(), mean, stddev,
                                        dtypeOf(op.getResult())));
}
static LogicalResult evalOp(RngUniformOp op, Operands o, Results &r) {
  double low = op.getLow().convertToDouble();
  double high = op.getHigh().convertToDouble();
  if (o.empty())
    return produce(r, ref::rngUniform(shapeOf(op.getResult()), op.getSeed(),
                                      low, high, dtypeOf(op.getResult())));
  FailureOr<std::vector<int64_t>> offsets = rngOffsets(op, o);
  if (failed(offsets))
    return failure();
  return produce(r, ref::rngUniformSlice(toVector(*op.getGlobalShape()),
                                         *offsets, shapeOf(op.getResult()),
                                         op.getSeed(), low, high,
                                         dtypeOf(op.getResult())));
}
static LogicalResult evalOp(MseLossOp, Operands o, Results &r) {
  return produce(r, ref::mseLoss(*o[0], *o[1]));
}
/// The update in double, each result rounded once by the driver (its
/// decomposition rounds every intermediate: they agree to round-off).
static LogicalResult evalOp(AdamWOp op, Operands o, Results &r) {
  ref::AdamWScalars scalars;
  scalars.learningRate = (*o[4])[0];
  scalars.correction1 = (*o[5])[0];
  scalars.correction2 = (*o[6])[0];
  scalars.beta1 = (*o[7])[0];
  scalars.oneMinusBeta1 = (*o[8])[0];
  scalars.beta2 = (*o[9])[0];
  scalars.oneMinusBeta2 = (*o[10])[0];
  scalars.epsilon = (*o[11])[0];
  if (op.getWeightDecay())
    scalars.weightDecay = (*o[12])[0];
  for (Tensor &result : ref::adamw(*o[0], *o[1], *o[2], *o[3], scalars))
    r.push_back(std::move(result));
  return success();
}
/// Numerically the identity: shardings do not change values.
static LogicalResult evalOp(ShardingConstraintOp, Operands o, Results &r) {
  return produce(r, *o[0]);
}
/// The identity too: a reshard appears in global programs, where each
/// device holds the whole value.
static LogicalResult evalOp(ReshardOp, Operands o, Results &r) {
  return produce(r, *o[0]);
}

/// The received block, which the start's evaluation already holds.
static LogicalResult evalOp(CollectivePermuteDoneOp, Operands o, Results &r) {
  return produce(r, *o[0]);
}

/// Moves between device and host memory do not change values.
static LogicalResult evalOp(OffloadOp, Operands o, Results &r) {
  return produce(r, *o[0]);
}
static LogicalResult evalOp(ReloadOp, Operands o, Results &r) {
  return produce(r, *o[0]);
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {
/// Forwards the interface to the `evalOp` overload of `OpTy`.
template <typename OpTy>
struct EvaluableModel
    : public EvaluableOpInterface::ExternalModel<EvaluableModel<OpTy>, OpTy> {
  LogicalResult evaluate(Operation *op, ArrayRef<const Tensor *> operands,
                         SmallVectorImpl<Tensor> &results) const {
    return evalOp(cast<OpTy>(op), operands, results);
  }
};
} // namespace

template <typename... OpTys>
static void attachEvaluableModels(MLIRContext *context) {
  (OpTys::template attachInterface<EvaluableModel<OpTys>>(*context), ...);
}

void mlir::sd::registerEvaluatorInterfaces(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attachEvaluableModels<
        // Elementwise.
        SD_ELEMENTWISE_MATH_OPS, CompareOp, SelectOp, ConvertOp,
        // Reductions and shapes.
        ReduceSumOp, ReduceMaxOp, ReduceMeanOp, BroadcastInDimOp, ReshapeOp,
        TransposeOp, SliceOp, ConcatOp, PadOp,
        // Linear algebra and neural-network ops.
        DotGeneralOp, LayerNormOp, RmsNormOp, GroupNormOp, SoftmaxOp,
        AttentionOp, FlashAttentionOp, FlashAttentionDqOp, FlashAttentionDkvOp,
        Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp, UpsampleNearestOp,
        // Constants, random numbers, loss, the optimizer, annotations.
        ConstantOp, IotaOp, RngNormalOp, RngUniformOp, MseLossOp, AdamWOp,
        ShardingConstraintOp, ReshardOp,
        // Memory moves, the end of an asynchronous permute.
        OffloadOp, ReloadOp, CollectivePermuteDoneOp>(context);
  });
  registerCollectiveEvaluatorInterfaces(registry);
}
