//===- SDCost.cpp - what each sd op costs ---------------------------------===//
//
// CostOpInterface implementations. Elementwise ops share the interface's
// default (result elements × FLOPs per element, the constants in SDOps.td or
// below); every other op states its own FLOP count here, and collectives
// what they send. The conventions are in SDInterfaces.td.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sd;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t mlir::sd::getElementBytes(Type type) {
  Type element = type;
  if (auto shaped = dyn_cast<ShapedType>(type))
    element = shaped.getElementType();
  if (!element.isIntOrFloat())
    return 0;
  return (element.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t mlir::sd::getNumElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped)
    return 1;
  return shaped.getNumElements();
}

int64_t mlir::sd::getTensorBytes(Type type) {
  return getNumElements(type) * getElementBytes(type);
}

int64_t mlir::sd::getElementwiseFlops(Operation *op, int64_t flopsPerElement) {
  int64_t elements = 0;
  for (Type type : op->getResultTypes())
    elements += getNumElements(type);
  return elements * flopsPerElement;
}

int64_t mlir::sd::getOperandAndResultBytes(Operation *op) {
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

// Tanh form: x³ (2), ·0.044715, +x, ·sqrt(2/π), tanh, 1+, 0.5·x, · = 9.
// Exact form: x/sqrt(2), erf, 1+, 0.5·x, · = 5.
int64_t GeluOp::getFlopsPerElement() { return getApproximate() ? 9 : 5; }

// Max, subtract, exp, sum, divide.
int64_t SoftmaxOp::getFlopsPerElement() { return 5; }

// Mean, centre, square, variance sum, normalize; then scale and bias.
int64_t LayerNormOp::getFlopsPerElement() {
  return 5 + (getScale() ? 1 : 0) + (getBias() ? 1 : 0);
}

int64_t GroupNormOp::getFlopsPerElement() {
  return 5 + (getScale() ? 1 : 0) + (getBias() ? 1 : 0);
}

// Square, sum, normalize; then scale.
int64_t RmsNormOp::getFlopsPerElement() { return 3 + (getScale() ? 1 : 0); }

// low + (high − low)·u.
int64_t RngUniformOp::getFlopsPerElement() { return 2; }

// Box–Muller: mean + stddev·sqrt(−2·ln u1)·cos(2π·u2).
int64_t RngNormalOp::getFlopsPerElement() { return 8; }

//===----------------------------------------------------------------------===//
// Ops with their own formula
//===----------------------------------------------------------------------===//

// 2·M·N·K: a multiply and an add per result element and contracted index.
int64_t DotGeneralOp::getFlops() {
  int64_t contracted = 1;
  for (int64_t dim : getLhsContract())
    contracted *= shapeOf(getLhs())[dim];
  return 2 * getNumElements(getType()) * contracted;
}

// Q·Kᵀ and P·V (2·B·H·Sq·Skv·D and 2·B·H·Sq·Skv·Dv), the scale and the
// softmax (6 per score), the mask (1 per score).
int64_t AttentionOp::getFlops() {
  ArrayRef<int64_t> query = shapeOf(getQuery());
  ArrayRef<int64_t> value = shapeOf(getValue());
  int64_t scores = query[0] * query[1] * query[2] * value[2];
  int64_t perScore = 2 * (query[3] + value[3]) + 6 + (getMask() ? 1 : 0);
  return scores * perScore;
}

// 2·N·Ho·Wo·Cout·KH·KW·Cin/groups, plus one add per output for the bias.
int64_t Conv2DOp::getFlops() {
  ArrayRef<int64_t> kernel = shapeOf(getKernel());
  int64_t outputs = getNumElements(getType());
  int64_t perOutput = 2 * kernel[0] * kernel[1] * kernel[2];
  return outputs * perOutput + (getBias() ? outputs : 0);
}

// Subtract, square and sum per element (the final division is one FLOP).
int64_t MseLossOp::getFlops() {
  return 3 * getNumElements(getPredictions().getType());
}

// Data movement, constants and annotations compute nothing.
#define SD_NO_FLOPS(OpTy)                                                      \
  int64_t OpTy::getFlops() { return 0; }
SD_NO_FLOPS(BroadcastInDimOp)
SD_NO_FLOPS(ReshapeOp)
SD_NO_FLOPS(TransposeOp)
SD_NO_FLOPS(SliceOp)
SD_NO_FLOPS(ConcatOp)
SD_NO_FLOPS(PadOp)
SD_NO_FLOPS(UpsampleNearestOp)
SD_NO_FLOPS(ConstantOp)
SD_NO_FLOPS(IotaOp)
SD_NO_FLOPS(ShardingConstraintOp)
SD_NO_FLOPS(ReshardOp)
// Collectives: the sums of reductions are not counted (see
// CostOpInterface).
SD_NO_FLOPS(AllGatherOp)
SD_NO_FLOPS(AllSliceOp)
SD_NO_FLOPS(ReduceScatterOp)
SD_NO_FLOPS(AllReduceOp)
SD_NO_FLOPS(AllToAllOp)
SD_NO_FLOPS(CollectivePermuteOp)
#undef SD_NO_FLOPS

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
std::optional<CommunicationInfo>
AllGatherOp::getCommunication(SymbolTableCollection &symbols) {
  return makeInfo(*this, getMeshAttr(), symbols,
                  CommunicationPattern::AllGather, flattenAxes(getAxesPerDim()),
                  getTensorBytes(getType()));
}

// Local: each device keeps its block.
std::optional<CommunicationInfo>
AllSliceOp::getCommunication(SymbolTableCollection &symbols) {
  return makeInfo(*this, getMeshAttr(), symbols, CommunicationPattern::None,
                  flattenAxes(getAxesPerDim()),
                  getTensorBytes(getOperand().getType()));
}

// S is the unscattered (operand) tensor.
std::optional<CommunicationInfo>
ReduceScatterOp::getCommunication(SymbolTableCollection &symbols) {
  return makeInfo(
      *this, getMeshAttr(), symbols, CommunicationPattern::ReduceScatter,
      flattenAxes(getAxesPerDim()), getTensorBytes(getOperand().getType()));
}

std::optional<CommunicationInfo>
AllReduceOp::getCommunication(SymbolTableCollection &symbols) {
  return makeInfo(
      *this, getMeshAttr(), symbols, CommunicationPattern::AllReduce,
      toStringRefs(getReductionAxes()), getTensorBytes(getOperand().getType()));
}

std::optional<CommunicationInfo>
AllToAllOp::getCommunication(SymbolTableCollection &symbols) {
  return makeInfo(*this, getMeshAttr(), symbols, CommunicationPattern::AllToAll,
                  toStringRefs(getAxes()),
                  getTensorBytes(getOperand().getType()));
}

// Each device sends its S bytes at most once; a permute whose pairs all
// keep blocks in place (or that has none) sends nothing.
std::optional<CommunicationInfo>
CollectivePermuteOp::getCommunication(SymbolTableCollection &symbols) {
  CommunicationInfo info =
      makeInfo(*this, getMeshAttr(), symbols, CommunicationPattern::Permute,
               toStringRefs(getAxes()), getTensorBytes(getOperand().getType()));
  if (llvm::all_of(getPairList(), [](std::pair<int64_t, int64_t> pair) {
        return pair.first == pair.second;
      }))
    info.pattern = CommunicationPattern::None;
  return info;
}
