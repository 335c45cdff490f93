//===- CostModels.cpp - what each sd op costs -----------------------------===//
//
// CostOpInterface's external models. Elementwise ops, normalizations,
// softmax and random numbers cost a number of FLOPs per result element;
// every other op states its own formula, collectives what they send, memory
// moves where their results live, and views which operand they show. The
// conventions are in SDInterfaces.td; `registerCostModels` attaches the
// models as the evaluator attaches its own.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModels.h"
#include "sd/IR/SDOps.h"
#include "sd/Runtime/ConvScratch.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t mlir::sd::getElementBytes(Type type) {
  Type element = type;
  // Ranked tensors first: a type-ID check, where ShapedType is an interface
  // lookup (the cost model asks for every operand and result).
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    element = tensor.getElementType();
  else if (auto shaped = dyn_cast<ShapedType>(type))
    element = shaped.getElementType();
  // The element types of a training step first: type-ID checks, where
  // FloatType is an interface lookup.
  if (isa<Float32Type>(element))
    return 4;
  if (isa<BFloat16Type, Float16Type>(element))
    return 2;
  if (!element.isIntOrFloat())
    return 0;
  return (element.getIntOrFloatBitWidth() + 7) / 8;
}

/// Elements of a static-shape tensor type (1 for a scalar type).
static int64_t getNumElements(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.getNumElements();
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped)
    return 1;
  return shaped.getNumElements();
}

int64_t mlir::sd::getTensorBytes(Type type) {
  return getNumElements(type) * getElementBytes(type);
}

/// The elementwise FLOP count: elements of all results × `flopsPerElement`.
static int64_t getElementwiseFlops(Operation *op, int64_t flopsPerElement) {
  int64_t elements = 0;
  for (Type type : op->getResultTypes())
    elements += getNumElements(type);
  return elements * flopsPerElement;
}

/// Bytes of all operands plus all results of `op`.
static int64_t getOperandAndResultBytes(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes += getTensorBytes(type);
  for (Type type : op->getResultTypes())
    bytes += getTensorBytes(type);
  return bytes;
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

//===----------------------------------------------------------------------===//
// FLOPs per element (elementwise ops, norms, softmax, random numbers)
//===----------------------------------------------------------------------===//

// One FLOP per element unless the op says otherwise: add, sub, mul, div,
// max, min, pow, neg, exp, log, sqrt, tanh, sin, cos, compare, select,
// convert.
template <typename OpTy> static int64_t flopsPerElement(OpTy) { return 1; }

// 1/sqrt(x): a square root and a division.
static int64_t flopsPerElement(RsqrtOp) { return 2; }

// 1/(1+e^-x): negate, exp, add, divide.
static int64_t flopsPerElement(SigmoidOp) { return 4; }

// x·sigmoid(x).
static int64_t flopsPerElement(SiluOp) { return 5; }

// The error function.
static int64_t flopsPerElement(ErfOp) { return 4; }

// Tanh form: x³ (2), ·0.044715, +x, ·sqrt(2/π), tanh, 1+, 0.5·x, · = 9.
// Exact form: x/sqrt(2), erf, 1+, 0.5·x, · = 5.
static int64_t flopsPerElement(GeluOp op) {
  return op.getApproximate() ? 9 : 5;
}

// Max, subtract, exp, sum, divide.
static int64_t flopsPerElement(SoftmaxOp) { return 5; }

// Mean, centre, square, variance sum, normalize; then scale and bias.
static int64_t flopsPerElement(LayerNormOp op) {
  return 5 + (op.getScale() ? 1 : 0) + (op.getBias() ? 1 : 0);
}

static int64_t flopsPerElement(GroupNormOp op) {
  return 5 + (op.getScale() ? 1 : 0) + (op.getBias() ? 1 : 0);
}

// Square, sum, normalize; then scale.
static int64_t flopsPerElement(RmsNormOp op) {
  return 3 + (op.getScale() ? 1 : 0);
}

// low + (high − low)·u.
static int64_t flopsPerElement(RngUniformOp) { return 2; }

// Box–Muller: mean + stddev·sqrt(−2·ln u1)·cos(2π·u2).
static int64_t flopsPerElement(RngNormalOp) { return 8; }

//===----------------------------------------------------------------------===//
// Ops with their own formula
//===----------------------------------------------------------------------===//

// 2·M·N·K: a multiply and an add per result element and contracted index.
static int64_t getFlops(DotGeneralOp op) {
  int64_t contracted = 1;
  for (int64_t dim : op.getLhsContract())
    contracted *= shapeOf(op.getLhs())[dim];
  return 2 * getNumElements(op.getType()) * contracted;
}

// Q·Kᵀ and P·V (2·B·H·Sq·Skv·D and 2·B·H·Sq·Skv·Dv), the scale and the
// softmax (6 per score), the mask (1 per score).
static int64_t getFlops(AttentionOp op) {
  ArrayRef<int64_t> query = shapeOf(op.getQuery());
  ArrayRef<int64_t> value = shapeOf(op.getValue());
  int64_t scores = query[0] * query[1] * query[2] * value[2];
  int64_t perScore = 2 * (query[3] + value[3]) + 6 + (op.getMask() ? 1 : 0);
  return scores * perScore;
}

/// The score count B·H·Sq·Skv of an attention op and its head_dims D, Dv.
static std::tuple<int64_t, int64_t, int64_t> attentionSizes(Value query,
                                                            Value value) {
  ArrayRef<int64_t> q = shapeOf(query);
  ArrayRef<int64_t> v = shapeOf(value);
  return {q[0] * q[1] * q[2] * v[2], q[3], v[3]};
}

// The tiled forward does the untiled one's work per score; the online
// softmax's rescaling of the accumulator is per row and block, not counted.
static int64_t getFlops(FlashAttentionOp op) {
  auto [scores, d, dv] = attentionSizes(op.getQuery(), op.getValue());
  return scores * (2 * (d + dv) + 6 + (op.getMask() ? 1 : 0));
}

// The scores and probabilities each backward op recomputes per tile: 2·D
// for scale·Q·Kᵀ and 2 for exp(S − lse), per score.
static int64_t recomputedScoreFlops(Value query, Value value) {
  auto [scores, d, dv] = attentionSizes(query, value);
  return scores * (2 * d + 2);
}
static int64_t getRecomputeFlops(FlashAttentionDkvOp op) {
  return recomputedScoreFlops(op.getQuery(), op.getValue());
}
// A dQ accumulated in the fused dK/dV pass recomputes nothing itself.
static int64_t getRecomputeFlops(FlashAttentionDqOp op) {
  return op.getFusingDkv() ? 0
                           : recomputedScoreFlops(op.getQuery(), op.getValue());
}

// Per score: the recomputed scores Q·Kᵀ (2·D) and P = exp(S − lse) (2),
// dP = dO·Vᵀ (2·Dv), dS = P∘(dP − Di) (2), and dQ += dS·K (2·D); plus
// Di = rowsum(dO∘O) per query row (2·Dv).
static int64_t getFlops(FlashAttentionDqOp op) {
  auto [scores, d, dv] = attentionSizes(op.getQuery(), op.getValue());
  // Accumulated in the fused dK/dV pass: only dQ += dS·K is this op's.
  if (op.getFusingDkv())
    return scores * 2 * d;
  int64_t rows = getNumElements(op.getLogsumexp().getType());
  return scores * (4 * d + 2 * dv + 4 + (op.getMask() ? 1 : 0)) +
         rows * 2 * dv;
}

// Per score: Q·Kᵀ (2·D), P (2), dV += Pᵀ·dO (2·Dv), dP = dO·Vᵀ (2·Dv), dS
// (2) and dK += dSᵀ·Q (2·D); plus Di per query row (2·Dv).
static int64_t getFlops(FlashAttentionDkvOp op) {
  auto [scores, d, dv] = attentionSizes(op.getQuery(), op.getValue());
  int64_t rows = getNumElements(op.getLogsumexp().getType());
  return scores * (4 * d + 4 * dv + 4 + (op.getMask() ? 1 : 0)) +
         rows * 2 * dv;
}

/// A convolution's kernel [KH, KW, Cin/groups, Cout] and result
/// [N, Ho, Wo, Cout] (the gradients': the forward's).
static std::pair<Value, Value> convKernelAndResult(Conv2DOp op) {
  return {op.getKernel(), op.getResult()};
}
static std::pair<Value, Value> convKernelAndResult(Conv2DInputGradOp op) {
  return {op.getKernel(), op.getResultGrad()};
}
static std::pair<Value, Value> convKernelAndResult(Conv2DFilterGradOp op) {
  return {op.getKernelGrad(), op.getResultGrad()};
}

// 2·N·Ho·Wo·Cout·KH·KW·Cin/groups: the forward's products, which each
// gradient makes once too (dy·wᵀ into im2col rows, rowsᵀ·dy). The bias adds
// one per output; col2im's adds are not counted.
template <typename OpTy> static int64_t convFlops(OpTy op) {
  auto [kernel, result] = convKernelAndResult(op);
  ArrayRef<int64_t> k = shapeOf(kernel);
  return getNumElements(result.getType()) * 2 * k[0] * k[1] * k[2];
}
static int64_t getFlops(Conv2DOp op) {
  return convFlops(op) + (op.getBias() ? getNumElements(op.getType()) : 0);
}

// Subtract, square and sum per element (the final division is one FLOP).
static int64_t getFlops(MseLossOp op) {
  return 3 * getNumElements(op.getPredictions().getType());
}

//===----------------------------------------------------------------------===//
// Communication of the collectives
//===----------------------------------------------------------------------===//

/// The communication of a collective over `axes` of the mesh `meshName`:
/// the group size is the product of the axes' sizes (axes the mesh lacks,
/// which the verifier rejects, count as size 1).
static CommunicationInfo makeInfo(Operation *op, FlatSymbolRefAttr meshName,
                                  SymbolTableCollection &symbols,
                                  CommunicationPattern pattern,
                                  ArrayRef<StringRef> axes,
                                  int64_t tensorBytes) {
  CommunicationInfo info;
  info.pattern = pattern;
  info.axes.assign(axes.begin(), axes.end());
  info.tensorBytes = tensorBytes;
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(op, meshName);
  for (StringRef name : axes)
    if (MeshAxisAttr axis = mesh ? mesh.getMesh().getAxis(name) : nullptr)
      info.groupSize *= axis.getSize();
  return info;
}

/// All axes of a per-dimension collective, dimension by dimension.
static SmallVector<StringRef>
flattenAxes(ArrayRef<SmallVector<StringRef>> perDim) {
  SmallVector<StringRef> all;
  for (const SmallVector<StringRef> &axes : perDim)
    all.append(axes.begin(), axes.end());
  return all;
}

static SmallVector<StringRef> toStringRefs(ArrayAttr names) {
  return llvm::to_vector(llvm::map_range(
      names, [](Attribute name) { return cast<StringAttr>(name).getValue(); }));
}

// S is the gathered (result) tensor.
static CommunicationInfo communication(AllGatherOp op,
                                       SymbolTableCollection &symbols) {
  return makeInfo(
      op, op.getMeshAttr(), symbols, CommunicationPattern::AllGather,
      flattenAxes(op.getAxesPerDim()), getTensorBytes(op.getType()));
}

// Local: each device keeps its block.
static CommunicationInfo communication(AllSliceOp op,
                                       SymbolTableCollection &symbols) {
  return makeInfo(op, op.getMeshAttr(), symbols, CommunicationPattern::None,
                  flattenAxes(op.getAxesPerDim()),
                  getTensorBytes(op.getOperand().getType()));
}

// S is the unscattered (operand) tensor.
static CommunicationInfo communication(ReduceScatterOp op,
                                       SymbolTableCollection &symbols) {
  return makeInfo(op, op.getMeshAttr(), symbols,
                  CommunicationPattern::ReduceScatter,
                  flattenAxes(op.getAxesPerDim()),
                  getTensorBytes(op.getOperand().getType()));
}

static CommunicationInfo communication(AllReduceOp op,
                                       SymbolTableCollection &symbols) {
  return makeInfo(op, op.getMeshAttr(), symbols,
                  CommunicationPattern::AllReduce,
                  toStringRefs(op.getReductionAxes()),
                  getTensorBytes(op.getOperand().getType()));
}

// Within subgroups, each member keeps 1/m and sends the rest to m − 1
// peers.
static CommunicationInfo communication(AllToAllOp op,
                                       SymbolTableCollection &symbols) {
  CommunicationInfo info = makeInfo(
      op, op.getMeshAttr(), symbols, CommunicationPattern::AllToAll,
      toStringRefs(op.getAxes()), getTensorBytes(op.getOperand().getType()));
  info.groupSize = op.getExchangeSize(info.groupSize);
  return info;
}

// Each device sends its S bytes at most once; a permute whose pairs all
// keep blocks in place (or that has none) sends nothing. A start sends what
// its permute would.
template <typename OpTy,
          typename = std::enable_if_t<llvm::is_one_of<
              OpTy, CollectivePermuteOp, CollectivePermuteStartOp>::value>>
static CommunicationInfo communication(OpTy op,
                                       SymbolTableCollection &symbols) {
  CommunicationInfo info = makeInfo(
      op, op.getMeshAttr(), symbols, CommunicationPattern::Permute,
      toStringRefs(op.getAxes()), getTensorBytes(op.getOperand().getType()));
  if (llvm::all_of(op.getPairList(), [](std::pair<int64_t, int64_t> pair) {
        return pair.first == pair.second;
      }))
    info.pattern = CommunicationPattern::None;
  return info;
}

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

namespace {
/// What every op shares: its bytes are its operands and results.
template <typename ConcreteModel, typename OpTy>
struct CostModelBase
    : public CostOpInterface::ExternalModel<ConcreteModel, OpTy> {
  int64_t getBytesAccessed(Operation *op) const {
    return getOperandAndResultBytes(op);
  }
};

/// Elementwise ops, normalizations, softmax, random numbers: result
/// elements × `flopsPerElement(op)`.
template <typename OpTy>
struct PerElementCost : public CostModelBase<PerElementCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *op) const {
    return getElementwiseFlops(op, flopsPerElement(cast<OpTy>(op)));
  }
};

/// Elementwise arithmetic, comparisons and selects: as PerElementCost, and
/// fused into their readers.
template <typename OpTy>
struct ElementwiseCost : public CostModelBase<ElementwiseCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *op) const {
    return getElementwiseFlops(op, flopsPerElement(cast<OpTy>(op)));
  }
  bool isFusible(Operation *) const { return true; }
};

/// AdamW's update: the elementwise ops it decomposes into, per parameter
/// element (not per result), fused into one loop like them.
struct AdamWCost : public CostModelBase<AdamWCost, AdamWOp> {
  int64_t getFlops(Operation *op) const {
    // mu' 3 (2 products, a sum), nu' 4 (g·g, 2 products, a sum), the two
    // corrections 2, sqrt, + eps, the quotient 3, the decay 2 (a product
    // and a sum), the step 2 (· lr, −).
    auto adamw = cast<AdamWOp>(op);
    int64_t perElement = 14 + (adamw.getWeightDecay() ? 2 : 0);
    return getNumElements(adamw.getParam().getType()) * perElement;
  }
  bool isFusible(Operation *) const { return true; }
};

/// Ops with a formula of their own: `getFlops(op)`.
template <typename OpTy>
struct FormulaCost : public CostModelBase<FormulaCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *op) const { return ::getFlops(cast<OpTy>(op)); }
};

/// conv2d and its gradients: their formula, and the im2col rows their
/// kernels borrow.
template <typename OpTy>
struct ConvCost : public CostModelBase<ConvCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *op) const {
    if constexpr (std::is_same_v<OpTy, Conv2DOp>)
      return ::getFlops(cast<OpTy>(op));
    else
      return convFlops(cast<OpTy>(op));
  }
  /// The runtime's scratch for this pass on these operands
  /// (sd/Runtime/ConvScratch.h, which the kernels size theirs by).
  int64_t getWorkspaceBytes(Operation *op) const {
    auto conv = cast<OpTy>(op);
    auto [kernel, result] = convKernelAndResult(conv);
    ::sd::rt::ConvPass pass = ::sd::rt::ConvPass::Forward;
    Value input = op->getOperand(0);
    if constexpr (std::is_same_v<OpTy, Conv2DInputGradOp>) {
      pass = ::sd::rt::ConvPass::InputGrad;
      input = conv.getInputGrad();
    } else if constexpr (std::is_same_v<OpTy, Conv2DFilterGradOp>) {
      pass = ::sd::rt::ConvPass::FilterGrad;
    }
    ArrayRef<int64_t> in = shapeOf(input), k = shapeOf(kernel),
                      out = shapeOf(result);
    if (llvm::any_of(in, ShapedType::isDynamic) ||
        llvm::any_of(k, ShapedType::isDynamic) ||
        llvm::any_of(out, ShapedType::isDynamic))
      return 0;
    // The filter gradient's kernel may be f32 for bf16 operands: the
    // kernels run on the operands' type.
    bool bf16 = getElementTypeOrSelf(op->getOperand(0).getType()).isBF16();
    return ::sd::rt::conv2dScratchFloats(
               pass, in.data(), k.data(), out.data(), conv.getStrides().data(),
               conv.getPadding().data(), conv.getGroups(), bf16) *
           int64_t{sizeof(float)};
  }
};

/// The flash-attention backward ops: a formula, part of which recomputes
/// the forward's scores and probabilities (`getRecomputeFlops(op)`).
template <typename OpTy>
struct FlashBackwardCost : public CostModelBase<FlashBackwardCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *op) const { return ::getFlops(cast<OpTy>(op)); }
  int64_t getRecomputeFlops(Operation *op) const {
    return ::getRecomputeFlops(cast<OpTy>(op));
  }
};

/// Reductions: one add, max or sum input per operand element.
template <typename OpTy>
struct ReduceCost : public CostModelBase<ReduceCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *op) const {
    return getNumElements(op->getOperand(0).getType());
  }
};

/// Data movement, constants and annotations compute nothing.
template <typename OpTy>
struct NoFlopsCost : public CostModelBase<NoFlopsCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *) const { return 0; }
};

/// Broadcasts, pads, concatenations, constants and iota: no FLOPs, fused
/// into their readers.
template <typename OpTy>
struct FusedMoveCost : public CostModelBase<FusedMoveCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *) const { return 0; }
  bool isFusible(Operation *) const { return true; }
};

/// Reshape, transpose, slice: their result holds their operand's elements,
/// rearranged, and computes nothing; fused into their readers.
template <typename OpTy>
struct ViewCost : public CostModelBase<ViewCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *) const { return 0; }
  Value getViewSource(Operation *op) const { return op->getOperand(0); }
  bool isFusible(Operation *) const { return true; }
};

/// Ops that are their operand's value and buffer and move nothing: a
/// sharding constraint (an annotation), a permute's done (its bytes are the
/// start's).
template <typename OpTy>
struct AliasCost : public CostModelBase<AliasCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *) const { return 0; }
  int64_t getBytesAccessed(Operation *) const { return 0; }
  Value getViewSource(Operation *op) const { return op->getOperand(0); }
};

/// A convert holds its operand's elements too, each rounded once.
struct ConvertCost : public CostModelBase<ConvertCost, ConvertOp> {
  int64_t getFlops(Operation *op) const { return getElementwiseFlops(op, 1); }
  Value getViewSource(Operation *op) const { return op->getOperand(0); }
  bool isFusible(Operation *) const { return true; }
};

/// Collectives: the sums of reductions are not counted (see
/// CostOpInterface); what they send is `communication(op, symbols)`.
template <typename OpTy>
struct CollectiveCost : public CostModelBase<CollectiveCost<OpTy>, OpTy> {
  int64_t getFlops(Operation *) const { return 0; }
  std::optional<CommunicationInfo>
  getCommunication(Operation *op, SymbolTableCollection &symbols) const {
    return communication(cast<OpTy>(op), symbols);
  }
};

/// sd.offload and sd.reload do no arithmetic; their bytes are the transfer
/// the cost model counts between the memory they read and `Memory`.
template <typename OpTy, MemorySpace Memory>
struct MemoryMoveCost
    : public CostModelBase<MemoryMoveCost<OpTy, Memory>, OpTy> {
  int64_t getFlops(Operation *) const { return 0; }
  MemorySpace getResultMemory(Operation *) const { return Memory; }
};
} // namespace

void mlir::sd::registerCostModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attachModels<ElementwiseCost, SD_ELEMENTWISE_MATH_OPS, CompareOp, SelectOp>(
        *context);
    AdamWOp::attachInterface<AdamWCost>(*context);
    // Normalizations, softmax, random numbers.
    attachModels<PerElementCost, LayerNormOp, RmsNormOp, GroupNormOp, SoftmaxOp,
                 RngNormalOp, RngUniformOp>(*context);
    attachModels<ReduceCost, ReduceSumOp, ReduceMaxOp, ReduceMeanOp>(*context);
    attachModels<FormulaCost, DotGeneralOp, AttentionOp, FlashAttentionOp,
                 MseLossOp>(*context);
    Conv2DOp::attachInterface<ConvCost<Conv2DOp>>(*context);
    Conv2DInputGradOp::attachInterface<ConvCost<Conv2DInputGradOp>>(*context);
    Conv2DFilterGradOp::attachInterface<ConvCost<Conv2DFilterGradOp>>(*context);
    attachModels<FlashBackwardCost, FlashAttentionDqOp, FlashAttentionDkvOp>(
        *context);
    attachModels<FusedMoveCost, BroadcastInDimOp, ConcatOp, PadOp,
                 UpsampleNearestOp, ConstantOp, IotaOp>(*context);
    attachModels<NoFlopsCost, ReshardOp>(*context);
    attachModels<ViewCost, ReshapeOp, TransposeOp, SliceOp>(*context);
    attachModels<AliasCost, CollectivePermuteDoneOp, ShardingConstraintOp>(
        *context);
    ConvertOp::attachInterface<ConvertCost>(*context);
    attachModels<CollectiveCost, AllGatherOp, AllSliceOp, ReduceScatterOp,
                 AllReduceOp, AllToAllOp, CollectivePermuteOp,
                 CollectivePermuteStartOp>(*context);
    // Each device knows its own coordinates: nothing is sent.
    attachModels<NoFlopsCost, AxisIndexOp>(*context);
    OffloadOp::attachInterface<MemoryMoveCost<OffloadOp, MemorySpace::Host>>(
        *context);
    ReloadOp::attachInterface<MemoryMoveCost<ReloadOp, MemorySpace::Device>>(
        *context);
  });
}
