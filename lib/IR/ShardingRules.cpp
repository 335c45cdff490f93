//===- ShardingRules.cpp - each op's sharding rule ------------------------===//
//
// ShardingRuleOpInterface implementations: each op says which factors its
// dimensions are made of and what kind each factor is (#sd.sharding_rule).
// Elementwise ops share the interface's default, getPointwiseShardingRule.
// Factors are added in the order their dimensions first appear in the
// operands, so that printed rules read like einsums ([i, j], [j, k]).
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/IR/ShardingRuleBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sd;

static constexpr int64_t kNoDim = ShardingRuleBuilder::kNoDim;
static constexpr FactorKind kPassThrough = FactorKind::PassThrough;
static constexpr FactorKind kReduction = FactorKind::Reduction;
static constexpr FactorKind kNeedReplication = FactorKind::NeedReplication;

/// Rules need every dimension's size: fails (after an error on `op`) on a
/// dynamic or zero-size dimension, the only ops without a rule.
static LogicalResult checkShapes(Operation *op) {
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    auto tensorType = dyn_cast<RankedTensorType>(type);
    if (tensorType && tensorType.hasStaticShape() &&
        tensorType.getNumElements() > 0)
      return success();
    // A static zero-size dimension is not fixed by sd-specialize-batch.
    if (tensorType && tensorType.hasStaticShape())
      return op->emitOpError("has no sharding rule while ")
             << what << " #" << index << " has type " << type
             << " with a zero-size dimension; sd needs non-empty tensors";
    return op->emitOpError("has no sharding rule while ")
           << what << " #" << index << " has type " << type
           << "; shapes must be static and non-empty (run "
              "sd-specialize-batch first)";
  };
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", index)))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", index)))
      return failure();
  return success();
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// Operand dimensions for ShardingRuleBuilder::addFactor: kNoDim for every
/// operand but those set afterwards.
static SmallVector<int64_t> noDims(Operation *op) {
  return SmallVector<int64_t>(op->getNumOperands(), kNoDim);
}

/// The position among all operands of optional operand group `odsIndex`, or
/// -1 when the optional operand is absent.
template <typename OpTy>
static int64_t optionalOperandIndex(OpTy op, unsigned odsIndex) {
  auto [start, length] = op.getODSOperandIndexAndLength(odsIndex);
  return length == 0 ? -1 : static_cast<int64_t>(start);
}

//===----------------------------------------------------------------------===//
// Elementwise (the interface default), softmax, reductions, loss
//===----------------------------------------------------------------------===//

OpShardingRuleAttr mlir::sd::getPointwiseShardingRule(Operation *op) {
  if (failed(checkShapes(op)))
    return {};
  // Scalars (none today) take part in no factor; all others share a shape.
  std::optional<ArrayRef<int64_t>> shape;
  for (Type type :
       llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes())) {
    ArrayRef<int64_t> current = cast<RankedTensorType>(type).getShape();
    if (current.empty())
      continue;
    if (shape && *shape != current) {
      op->emitOpError("is not elementwise (its tensors differ in shape) and "
                      "needs a sharding rule of its own");
      return {};
    }
    shape = current;
  }
  return ShardingRuleBuilder(op)
      .addPointwise(shape.value_or(ArrayRef<int64_t>()))
      .build();
}

OpShardingRuleAttr SoftmaxOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  // Each row needs all its elements for the max and the sum.
  int64_t softmaxDim = getDim();
  return ShardingRuleBuilder(*this)
      .addPointwise(shapeOf(getOperand()),
                    [&](int64_t dim) {
                      return dim == softmaxDim ? kNeedReplication
                                               : kPassThrough;
                    })
      .build();
}

OpShardingRuleAttr mlir::sd::getReduceShardingRule(Operation *op,
                                                   ArrayRef<int64_t> dims) {
  if (failed(checkShapes(op)))
    return {};
  ShardingRuleBuilder builder(op);
  int64_t resultDim = 0;
  for (auto [dim, size] : llvm::enumerate(shapeOf(op->getOperand(0)))) {
    int64_t d = dim;
    if (llvm::is_contained(dims, d))
      builder.addFactor({d}, {kNoDim}, size, kReduction);
    else
      builder.addFactor({d}, {resultDim++}, size);
  }
  return builder.build();
}

OpShardingRuleAttr MseLossOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  // The scalar loss sums over every element of both operands.
  ShardingRuleBuilder builder(*this);
  for (auto [dim, size] : llvm::enumerate(shapeOf(getPredictions()))) {
    int64_t d = dim;
    builder.addFactor({d, d}, {kNoDim}, size, kReduction);
  }
  return builder.build();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

OpShardingRuleAttr BroadcastInDimOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  ArrayRef<int64_t> inShape = shapeOf(getOperand());
  ArrayRef<int64_t> outShape = shapeOf(getResult());
  // Result dimension -> the operand dimension that becomes it.
  SmallVector<int64_t> operandDimOf(outShape.size(), kNoDim);
  for (auto [operandDim, resultDim] : llvm::enumerate(getDims()))
    operandDimOf[resultDim] = operandDim;
  ShardingRuleBuilder builder(*this);
  for (auto [resultDim, size] : llvm::enumerate(outShape)) {
    int64_t operandDim = operandDimOf[resultDim];
    // A size-1 operand dimension that is repeated maps to no factor: its
    // one element is needed by every shard of the result dimension.
    if (operandDim != kNoDim && inShape[operandDim] != size)
      operandDim = kNoDim;
    builder.addFactor({operandDim}, {static_cast<int64_t>(resultDim)}, size);
  }
  return builder.build();
}

OpShardingRuleAttr ReshapeOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  ShardingRuleBuilder builder(*this);
  if (failed(builder.addReshape(shapeOf(getOperand()), shapeOf(getResult())))) {
    emitOpError("has no sharding rule: its shapes have different element "
                "counts");
    return {};
  }
  return builder.build();
}

OpShardingRuleAttr TransposeOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  // Factors follow the operand's dimensions; the result permutes them.
  ArrayRef<int64_t> permutation = getPermutation();
  ShardingRuleBuilder builder(*this);
  for (auto [operandDim, size] : llvm::enumerate(shapeOf(getOperand()))) {
    int64_t resultDim =
        llvm::find(permutation, operandDim) - permutation.begin();
    builder.addFactor({static_cast<int64_t>(operandDim)}, {resultDim}, size);
  }
  return builder.build();
}

/// Operand `operand` and result 0 share a pass-through factor on each
/// dimension of equal size; on the others, each gets a need_replication
/// factor of its own (slice, pad: the data moves between shards).
static void addWholeOrReplicated(ShardingRuleBuilder &builder, Operation *op,
                                 ArrayRef<bool> changed) {
  ArrayRef<int64_t> inShape = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> outShape = shapeOf(op->getResult(0));
  for (auto [dim, isChanged] : llvm::enumerate(changed)) {
    int64_t d = dim;
    if (!isChanged) {
      builder.addFactor({d}, {d}, inShape[d]);
      continue;
    }
    builder.addFactor({d}, {kNoDim}, inShape[d], kNeedReplication);
    builder.addFactor({kNoDim}, {d}, outShape[d], kNeedReplication);
  }
}

OpShardingRuleAttr SliceOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  // A dimension keeps its size exactly when it is taken whole.
  SmallVector<bool> changed;
  for (auto [in, out] :
       llvm::zip_equal(shapeOf(getOperand()), shapeOf(getResult())))
    changed.push_back(in != out);
  ShardingRuleBuilder builder(*this);
  addWholeOrReplicated(builder, *this, changed);
  return builder.build();
}

OpShardingRuleAttr PadOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  SmallVector<bool> changed;
  for (auto [low, high] : llvm::zip_equal(getLow(), getHigh()))
    changed.push_back(low != 0 || high != 0);
  ShardingRuleBuilder builder(*this);
  addWholeOrReplicated(builder, *this, changed);
  return builder.build();
}

OpShardingRuleAttr ConcatOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  int64_t concatDim = getDim();
  ArrayRef<int64_t> outShape = shapeOf(getResult());
  ShardingRuleBuilder builder(*this);
  for (auto [dim, size] : llvm::enumerate(outShape)) {
    int64_t d = dim;
    if (d != concatDim) {
      builder.addFactor(SmallVector<int64_t>(getNumOperands(), d), {d}, size);
      continue;
    }
    // Each input covers its own range of the concatenated dimension.
    for (auto [index, input] : llvm::enumerate(getInputs())) {
      SmallVector<int64_t> dims = noDims(*this);
      dims[index] = d;
      builder.addFactor(dims, {kNoDim}, shapeOf(input)[d], kNeedReplication);
    }
    builder.addFactor(noDims(*this), {d}, size, kNeedReplication);
  }
  return builder.build();
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, attention, convolution
//===----------------------------------------------------------------------===//

OpShardingRuleAttr DotGeneralOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  ArrayRef<int64_t> lhsShape = shapeOf(getLhs());
  ArrayRef<int64_t> rhsShape = shapeOf(getRhs());
  ArrayRef<int64_t> lhsBatch = getLhsBatch(), rhsBatch = getRhsBatch();
  ArrayRef<int64_t> lhsContract = getLhsContract();
  ArrayRef<int64_t> rhsContract = getRhsContract();
  auto isFree = [](int64_t dim, ArrayRef<int64_t> batch,
                   ArrayRef<int64_t> contract) {
    return !llvm::is_contained(batch, dim) &&
           !llvm::is_contained(contract, dim);
  };
  int64_t numLhsFree = 0;
  for (int64_t dim = 0, e = lhsShape.size(); dim < e; ++dim)
    numLhsFree += isFree(dim, lhsBatch, lhsContract);

  // Result: batch dimensions, lhs free dimensions, rhs free dimensions.
  // Factors follow the lhs dimensions, then the rhs free ones.
  ShardingRuleBuilder builder(*this);
  int64_t nextLhsFree = lhsBatch.size();
  for (int64_t dim = 0, e = lhsShape.size(); dim < e; ++dim) {
    int64_t size = lhsShape[dim];
    if (const int64_t *it = llvm::find(lhsBatch, dim); it != lhsBatch.end()) {
      int64_t pos = it - lhsBatch.begin();
      builder.addFactor({dim, rhsBatch[pos]}, {pos}, size);
    } else if (const int64_t *it = llvm::find(lhsContract, dim);
               it != lhsContract.end()) {
      builder.addFactor({dim, rhsContract[it - lhsContract.begin()]}, {kNoDim},
                        size, kReduction);
    } else {
      builder.addFactor({dim, kNoDim}, {nextLhsFree++}, size);
    }
  }
  int64_t nextRhsFree = lhsBatch.size() + numLhsFree;
  for (int64_t dim = 0, e = rhsShape.size(); dim < e; ++dim)
    if (isFree(dim, rhsBatch, rhsContract))
      builder.addFactor({kNoDim, dim}, {nextRhsFree++}, rhsShape[dim]);
  return builder.build();
}

/// layer_norm / rms_norm: statistics over the last dimension, which
/// therefore needs replication (scale and bias are per last-dimension
/// element); every other dimension passes through.
static OpShardingRuleAttr getLastDimNormRule(Operation *op, int64_t scaleIndex,
                                             int64_t biasIndex) {
  if (failed(checkShapes(op)))
    return {};
  ArrayRef<int64_t> shape = shapeOf(op->getOperand(0));
  int64_t last = shape.size() - 1;
  ShardingRuleBuilder builder(op);
  for (int64_t dim = 0; dim <= last; ++dim) {
    SmallVector<int64_t> dims = noDims(op);
    dims[0] = dim;
    if (dim < last) {
      builder.addFactor(dims, {dim}, shape[dim]);
      continue;
    }
    for (int64_t index : {scaleIndex, biasIndex})
      if (index >= 0)
        dims[index] = 0;
    builder.addFactor(dims, {dim}, shape[dim], kNeedReplication);
  }
  return builder.build();
}

OpShardingRuleAttr LayerNormOp::getShardingRule() {
  return getLastDimNormRule(*this, optionalOperandIndex(*this, 1),
                            optionalOperandIndex(*this, 2));
}

OpShardingRuleAttr RmsNormOp::getShardingRule() {
  return getLastDimNormRule(*this, optionalOperandIndex(*this, 1), -1);
}

OpShardingRuleAttr GroupNormOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  // Each sample's group statistics span all its non-batch elements. The
  // pixels may be split (each device sums its own, and sd-partition adds
  // the sums over the devices); the channels, which the groups cut, may
  // not.
  ArrayRef<int64_t> shape = shapeOf(getOperand());
  int64_t channels = shape.size() - 1;
  int64_t scaleIndex = optionalOperandIndex(*this, 1);
  int64_t biasIndex = optionalOperandIndex(*this, 2);
  ShardingRuleBuilder builder(*this);
  for (int64_t dim = 0; dim <= channels; ++dim) {
    SmallVector<int64_t> dims = noDims(*this);
    dims[0] = dim;
    if (dim == channels)
      for (int64_t index : {scaleIndex, biasIndex})
        if (index >= 0)
          dims[index] = 0;
    builder.addFactor(dims, {dim}, shape[dim],
                      dim == channels ? kNeedReplication : kPassThrough);
  }
  return builder.build();
}

namespace {
/// The factors of an attention op: batch b, heads h, query length sq, key
/// length skv, head_dims d (query and key) and dv (value), each with the
/// dimension it maps in every operand and result (kNoDim: none) and its
/// kind. Dimensions of a mask that is broadcast along batch or heads (size
/// 1) map to no factor.
class AttentionFactors {
public:
  AttentionFactors(Operation *op, Value query, Value value, Value mask,
                   int64_t maskOperand)
      : builder(op), q(shapeOf(query)), v(shapeOf(value)),
        maskShape(mask ? shapeOf(mask) : ArrayRef<int64_t>()),
        maskOperand(mask ? maskOperand : -1),
        numOperands(op->getNumOperands()) {}

  enum Factor { B, H, Sq, Skv, D, Dv };
  /// Adds factor `factor` of `kind`, mapped to the given dimensions of the
  /// operands (in order, without the mask) and results; the mask's
  /// dimension comes from the factor.
  void add(Factor factor, ArrayRef<int64_t> operandDims,
           ArrayRef<int64_t> resultDims, FactorKind kind) {
    static constexpr int64_t kMaskDim[] = {0, 1, 2, 3, kNoDim, kNoDim};
    int64_t size = factor == B    ? q[0]
                   : factor == H  ? q[1]
                   : factor == Sq ? q[2]
                   : factor == Skv ? v[2]
                   : factor == D  ? q[3]
                                  : v[3];
    SmallVector<int64_t> dims(operandDims);
    dims.resize(numOperands, kNoDim);
    int64_t maskDim = kMaskDim[factor];
    if (maskOperand >= 0 && maskDim != kNoDim &&
        maskShape[maskDim] == size)
      dims[maskOperand] = maskDim;
    builder.addFactor(dims, resultDims, size, kind);
  }
  OpShardingRuleAttr build() { return builder.build(); }

private:
  static constexpr int64_t kNoDim = ShardingRuleBuilder::kNoDim;
  ShardingRuleBuilder builder;
  ArrayRef<int64_t> q, v, maskShape;
  int64_t maskOperand, numOperands;
};
} // namespace

// Attention forward: query [b, h, sq, d], key [b, h, skv, d], value
// [b, h, skv, dv], then the optional mask; results [b, h, sq, dv] (and the
// log-sum-exp [b, h, sq] of the tiled form).
//   skv: softmax normalizes over it and P·V sums over it; sharding it needs
//     an online-softmax exchange (context parallelism), not a plain partial
//     sum: it needs replication.
//   d: Q·Kᵀ sums over it, but softmax follows before any sum could be
//     completed, so a partial sum cannot pass through: it needs replication.
// With context parallelism (no mask, one sequence) sq and skv are one
// pass-through factor: the partition model spreads the exchange.
static OpShardingRuleAttr attentionRule(Operation *op, Value query,
                                        Value value, Value mask, bool logSumExp,
                                        bool contextParallel = false) {
  constexpr int64_t n = ShardingRuleBuilder::kNoDim;
  using F = AttentionFactors;
  F factors(op, query, value, mask, 3);
  auto results = [&](int64_t dim, int64_t lseDim) {
    return logSumExp ? SmallVector<int64_t>{dim, lseDim}
                     : SmallVector<int64_t>{dim};
  };
  factors.add(F::B, {0, 0, 0}, results(0, 0), kPassThrough);
  factors.add(F::H, {1, 1, 1}, results(1, 1), kPassThrough);
  if (contextParallel) {
    factors.add(F::Sq, {2, 2, 2}, results(2, 2), kPassThrough);
  } else {
    factors.add(F::Sq, {2, n, n}, results(2, 2), kPassThrough);
    factors.add(F::Skv, {n, 2, 2}, results(n, n), kNeedReplication);
  }
  factors.add(F::D, {3, 3, n}, results(n, n), kNeedReplication);
  factors.add(F::Dv, {n, n, 3}, results(3, n), kPassThrough);
  return factors.build();
}

OpShardingRuleAttr AttentionOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  return attentionRule(*this, getQuery(), getValue(), getMask(), false);
}

OpShardingRuleAttr FlashAttentionOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  return attentionRule(*this, getQuery(), getValue(), getMask(), true,
                       getContextParallel().has_value());
}

// The backward ops' operands: query [b, h, sq, d], key [b, h, skv, d],
// value [b, h, skv, dv], out [b, h, sq, dv], logsumexp [b, h, sq], d_out
// [b, h, sq, dv], then the optional mask. With the log-sum-exp given, no
// softmax normalizes over skv: dQ = Σ_skv dS·K is a plain sum over the keys
// and dK, dV are plain sums over the queries.

OpShardingRuleAttr FlashAttentionDqOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  constexpr int64_t n = ShardingRuleBuilder::kNoDim;
  using F = AttentionFactors;
  F factors(*this, getQuery(), getValue(), getMask(), 6);
  factors.add(F::B, {0, 0, 0, 0, 0, 0}, {0}, kPassThrough);
  factors.add(F::H, {1, 1, 1, 1, 1, 1}, {1}, kPassThrough);
  if (getContextParallel()) {
    factors.add(F::Sq, {2, 2, 2, 2, 2, 2}, {2}, kPassThrough);
  } else {
    factors.add(F::Sq, {2, n, n, 2, 2, 2}, {2}, kPassThrough);
    factors.add(F::Skv, {n, 2, 2, n, n, n}, {n}, FactorKind::Reduction);
  }
  // dQ's head_dim is the key's, which Q·Kᵀ contracts inside exp.
  factors.add(F::D, {3, 3, n, n, n, n}, {3}, kNeedReplication);
  // dP = dO·Vᵀ and Di = rowsum(dO∘O) are sums over dv, and dQ is linear in
  // their difference.
  factors.add(F::Dv, {n, n, 3, 3, n, 3}, {n}, FactorKind::Reduction);
  return factors.build();
}

OpShardingRuleAttr FlashAttentionDkvOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  constexpr int64_t n = ShardingRuleBuilder::kNoDim;
  using F = AttentionFactors;
  F factors(*this, getQuery(), getValue(), getMask(), 6);
  factors.add(F::B, {0, 0, 0, 0, 0, 0}, {0, 0}, kPassThrough);
  factors.add(F::H, {1, 1, 1, 1, 1, 1}, {1, 1}, kPassThrough);
  if (getContextParallel()) {
    factors.add(F::Sq, {2, 2, 2, 2, 2, 2}, {2, 2}, kPassThrough);
  } else {
    factors.add(F::Sq, {2, n, n, 2, 2, 2}, {n, n}, FactorKind::Reduction);
    factors.add(F::Skv, {n, 2, 2, n, n, n}, {2, 2}, kPassThrough);
  }
  factors.add(F::D, {3, 3, n, n, n, n}, {3, n}, kNeedReplication);
  // dV keeps dv, but dK = scale·dSᵀ·Q sums over it inside dP: one factor
  // cannot be both, so it needs replication.
  factors.add(F::Dv, {n, n, 3, 3, n, 3}, {n, 3}, kNeedReplication);
  return factors.build();
}

namespace {
/// Where a convolution's forward input x [N, H, W, Cin], kernel
/// [KH, KW, Cin/G, Cout], result y [N, Ho, Wo, Cout] and bias [Cout] sit
/// among an op's operands and results (sd.conv2d and its two gradients
/// share one rule).
struct ConvRoles {
  /// Index among the operands (>= 0) or the results (~index), or absent.
  struct Slot {
    int64_t index = kAbsent;
    bool isResult = false;
  };
  static constexpr int64_t kAbsent = -1;
  Slot x, kernel, y, bias;
  int64_t numOperands, numResults;
};

/// Adds the factors of a convolution whose tensors are where `roles` says,
/// `filterGrad` for sd.conv2d_filter_grad (whose result is the kernel, so
/// that the batch and spatial dimensions are summed over).
///
/// A spatial dimension whose result size times the stride is the input's
/// (same-size and down-sampling convolutions) is one factor shared by the
/// input's and result's dimension, plus the stride as a minor input factor:
/// split over devices, each holds whole output rows and the input rows they
/// start from, and sd-partition exchanges the `k/2` boundary rows with the
/// neighbours (a halo). Other spatial dimensions need replication. Cin is
/// summed over; with groups, each output channel sees only its group's
/// inputs, so neither channel dimension can be split on its own.
void addConvFactors(ShardingRuleBuilder &builder, const ConvRoles &roles,
                    ArrayRef<int64_t> in, ArrayRef<int64_t> kernel,
                    ArrayRef<int64_t> out, ArrayRef<int64_t> strides,
                    int64_t groups, bool filterGrad) {
  constexpr int64_t n = ShardingRuleBuilder::kNoDim;
  // The operand and result dimension lists of a factor mapped to x's
  // `xDim`, the kernel's `kDim`, y's `yDim` and the bias's `bDim`.
  auto add = [&](int64_t xDim, int64_t kDim, int64_t yDim, int64_t bDim,
                 int64_t size, FactorKind kind) {
    SmallVector<int64_t> operands(roles.numOperands, n),
        results(roles.numResults, n);
    auto place = [&](ConvRoles::Slot slot, int64_t dim) {
      if (slot.index == ConvRoles::kAbsent)
        return;
      (slot.isResult ? results : operands)[slot.index] = dim;
    };
    place(roles.x, xDim);
    place(roles.kernel, kDim);
    place(roles.y, yDim);
    place(roles.bias, bDim);
    builder.addFactor(operands, results, size, kind);
  };
  bool grouped = groups > 1;
  // N and the spatial factors pass through a forward or input gradient and
  // are summed over by the filter gradient.
  FactorKind through = filterGrad ? kReduction : kPassThrough;
  add(0, n, 0, n, in[0], through);
  for (int64_t dim : {1, 2}) {
    int64_t stride = strides[dim - 1];
    if (out[dim] > 0 && out[dim] * stride == in[dim]) {
      add(dim, n, dim, n, out[dim], through);
      if (stride > 1)
        add(dim, n, n, n, stride, kNeedReplication);
      continue;
    }
    add(dim, n, n, n, in[dim], kNeedReplication);
    add(n, n, dim, n, out[dim], kNeedReplication);
  }
  // Cin: the forward sums over it.
  if (!grouped)
    add(3, 2, n, n, in[3],
        roles.x.isResult || filterGrad ? kPassThrough : kReduction);
  else
    add(3, n, n, n, in[3], kNeedReplication);
  for (int64_t dim : {0, 1}) // KH, KW
    add(n, dim, n, n, kernel[dim], kNeedReplication);
  if (grouped) // Cin / groups
    add(n, 2, n, n, kernel[2], kNeedReplication);
  // Cout: an input gradient sums over it.
  FactorKind coutKind = grouped                          ? kNeedReplication
                        : roles.y.isResult || filterGrad ? kPassThrough
                                                         : kReduction;
  add(n, 3, 3, 0, out[3], coutKind);
}
} // namespace

OpShardingRuleAttr Conv2DOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  ShardingRuleBuilder builder(*this);
  ConvRoles roles;
  roles.x = {0, false};
  roles.kernel = {1, false};
  roles.y = {0, true};
  if (getBias())
    roles.bias = {2, false};
  roles.numOperands = getNumOperands();
  roles.numResults = 1;
  addConvFactors(builder, roles, shapeOf(getInput()), shapeOf(getKernel()),
                 shapeOf(getResult()), getStrides(),
                 static_cast<int64_t>(getGroups()), /*filterGrad=*/false);
  return builder.build();
}

OpShardingRuleAttr Conv2DInputGradOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  ShardingRuleBuilder builder(*this);
  ConvRoles roles;
  roles.x = {0, true};
  roles.kernel = {1, false};
  roles.y = {0, false};
  roles.numOperands = 2;
  roles.numResults = 1;
  addConvFactors(builder, roles, shapeOf(getInputGrad()), shapeOf(getKernel()),
                 shapeOf(getResultGrad()), getStrides(),
                 static_cast<int64_t>(getGroups()), /*filterGrad=*/false);
  return builder.build();
}

OpShardingRuleAttr Conv2DFilterGradOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  ShardingRuleBuilder builder(*this);
  ConvRoles roles;
  roles.x = {0, false};
  roles.kernel = {0, true};
  roles.y = {1, false};
  roles.numOperands = 2;
  roles.numResults = 1;
  addConvFactors(builder, roles, shapeOf(getInput()), shapeOf(getKernelGrad()),
                 shapeOf(getResultGrad()), getStrides(),
                 static_cast<int64_t>(getGroups()), /*filterGrad=*/true);
  return builder.build();
}

OpShardingRuleAttr UpsampleNearestOp::getShardingRule() {
  if (failed(checkShapes(*this)))
    return {};
  // Result H is [h, scale]: pixel (h, r) copies operand pixel h, so both
  // the operand's rows and the repetitions may be split.
  ArrayRef<int64_t> in = shapeOf(getOperand());
  ShardingRuleBuilder builder(*this);
  builder.addFactor({0}, {0}, in[0]); // N
  for (int64_t dim : {1, 2}) {
    builder.addFactor({dim}, {dim}, in[dim]);
    int64_t scale = getScale()[dim - 1];
    if (scale > 1)
      builder.addFactor({kNoDim}, {dim}, scale);
  }
  builder.addFactor({3}, {3}, in[3]); // C
  return builder.build();
}

//===----------------------------------------------------------------------===//
// Constants and random numbers
//===----------------------------------------------------------------------===//

/// One pass-through factor per result dimension: a constant is sliced,
/// iota and the counter-based rng compute from global indices, so every
/// device can make its own block.
static OpShardingRuleAttr getSourceRule(Operation *op) {
  if (failed(checkShapes(op)))
    return {};
  return ShardingRuleBuilder(op)
      .addPointwise(shapeOf(op->getResult(0)))
      .build();
}

OpShardingRuleAttr ConstantOp::getShardingRule() {
  return getSourceRule(*this);
}
OpShardingRuleAttr IotaOp::getShardingRule() { return getSourceRule(*this); }
OpShardingRuleAttr RngNormalOp::getShardingRule() {
  return getSourceRule(*this);
}
OpShardingRuleAttr RngUniformOp::getShardingRule() {
  return getSourceRule(*this);
}
