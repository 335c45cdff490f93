//===- PartitionModels.cpp - how each op partitions -----------------------===//
//
// PartitionOpInterface's external models, which sd-partition's library
// attaches (`registerPartitionModels`): most ops are cloned with local
// types; the others build their local form here, with what they need: the
// block offset of a device along sharded axes (`sd.axis_index`) and scaling
// of partial means.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/PartitionModels.h"
#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sd;

using PartitionResult = FailureOr<SmallVector<Value>>;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The product of the sizes of `axes` in the mesh `sharding` names; failure
/// after an error on `op` when there is no such mesh.
static FailureOr<int64_t> axesSize(Operation *op, ShardingAttr sharding,
                                   ArrayRef<StringAttr> axes) {
  MeshAttr mesh =
      lookupMesh(op, sharding.getMeshName(), [&] { return op->emitOpError(); });
  if (!mesh)
    return failure();
  int64_t size = 1;
  for (StringAttr name : axes) {
    MeshAxisAttr axis = mesh.getAxis(name);
    if (!axis)
      return op->emitOpError()
             << "sharding names mesh axis " << name << ", which "
             << sharding.getMeshName() << " does not have";
    size *= axis.getSize();
  }
  return size;
}

/// The product of the sizes of the axes of `dims` of `sharding`.
static FailureOr<int64_t> dimsSize(Operation *op, ShardingAttr sharding,
                                   ArrayRef<int64_t> dims) {
  SmallVector<StringAttr> axes;
  for (int64_t dim : dims) {
    ArrayRef<StringAttr> dimAxes = sharding.getDimShardings()[dim].getAxes();
    axes.append(dimAxes.begin(), dimAxes.end());
  }
  return axesSize(op, sharding, axes);
}

/// `op` cloned with local operands and types: a clone keeps attributes and
/// properties; only the types change.
static SmallVector<Value> cloneLocal(OpBuilder &builder, Operation *op,
                                     ValueRange operands, TypeRange types) {
  Operation *clone = builder.clone(*op);
  clone->setOperands(operands);
  for (auto [result, type] : llvm::zip_equal(clone->getResults(), types))
    result.setType(type);
  return SmallVector<Value>(clone->getResults());
}

/// A constant of `type` (f32 or bf16) with every element `value`.
static Value splat(OpBuilder &builder, Location loc, RankedTensorType type,
                   double value) {
  auto element = FloatAttr::get(type.getElementType(), value);
  return ConstantOp::create(builder, loc, type,
                            DenseElementsAttr::get(type, {Attribute(element)}));
}

/// `value` times `factor`, elementwise.
static Value scale(OpBuilder &builder, Location loc, Value value,
                   double factor) {
  auto type = cast<RankedTensorType>(value.getType());
  return MulOp::create(builder, loc, value, splat(builder, loc, type, factor));
}

/// The offset (an f32 scalar) of the device's block of a dimension sharded
/// over `axes` with local extent `localSize`: its block index times the
/// extent; zero for a whole dimension.
static Value blockOffset(OpBuilder &builder, Location loc,
                         FlatSymbolRefAttr mesh, ArrayRef<StringAttr> axes,
                         int64_t localSize) {
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  if (axes.empty())
    return splat(builder, loc, scalar, 0.0);
  SmallVector<Attribute> names(axes.begin(), axes.end());
  Value index = AxisIndexOp::create(builder, loc, scalar, mesh,
                                    builder.getArrayAttr(names));
  return MulOp::create(builder, loc, index,
                       splat(builder, loc, scalar, localSize));
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

static PartitionResult partition(SliceOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  auto global = op.getOperand().getType();
  auto local = cast<RankedTensorType>(operands[0].getType());
  SmallVector<int64_t> start(op.getStart()), limit(op.getLimit()),
      strides(op.getStrides());
  for (int64_t dim = 0; dim < global.getRank(); ++dim) {
    if (local.getDimSize(dim) == global.getDimSize(dim))
      continue;
    // Only a dimension taken whole may be sharded (its factor passes
    // through); it stays whole locally.
    bool whole = start[dim] == 0 && strides[dim] == 1 &&
                 (limit[dim] == -1 || limit[dim] == global.getDimSize(dim));
    if (!whole)
      return op.emitOpError("slices dimension ")
             << dim << ", which is sharded over "
             << operandShardings[0].getDimShardings()[dim]
             << "; gather it first (run sd-propagate-sharding)";
    limit[dim] = local.getDimSize(dim);
  }
  auto slice = cast<SliceOp>(
      cloneLocal(builder, op, operands, types)[0].getDefiningOp());
  slice.setLimit(limit);
  return SmallVector<Value>{slice.getResult()};
}

//===----------------------------------------------------------------------===//
// Reductions and the loss
//===----------------------------------------------------------------------===//

static PartitionResult partition(ReduceMaxOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  FailureOr<int64_t> shards = dimsSize(op, operandShardings[0], op.getDims());
  if (failed(shards))
    return failure();
  if (*shards != 1)
    return op.emitOpError("reduces dimensions sharded over ")
           << *shards
           << " devices; a partial maximum cannot be completed "
              "by summing, so the reduced dimensions must be gathered first";
  return cloneLocal(builder, op, operands, types);
}

/// A mean over `dims` of the first operand, laid out as `sharding`: the
/// local mean over 1/n of the elements, divided by n, so that the partial
/// sums add up to the global mean.
static PartitionResult partitionMean(Operation *op, OpBuilder &builder,
                                     ValueRange operands, TypeRange types,
                                     ShardingAttr sharding,
                                     ArrayRef<int64_t> dims) {
  FailureOr<int64_t> shards = dimsSize(op, sharding, dims);
  if (failed(shards))
    return failure();
  SmallVector<Value> results = cloneLocal(builder, op, operands, types);
  if (*shards != 1)
    results[0] = scale(builder, op->getLoc(), results[0], 1.0 / *shards);
  return results;
}

static PartitionResult partition(ReduceMeanOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  return partitionMean(op, builder, operands, types, operandShardings[0],
                       op.getDims());
}

// The local sum of squares over the global element count.
static PartitionResult partition(MseLossOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  SmallVector<int64_t> all = llvm::to_vector(
      llvm::seq<int64_t>(0, op.getPredictions().getType().getRank()));
  return partitionMean(op, builder, operands, types, operandShardings[0], all);
}

static PartitionResult partition(Conv2DOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  SmallVector<Value> local(operands);
  FailureOr<int64_t> shards = dimsSize(op, operandShardings[0], {3});
  if (failed(shards))
    return failure();
  // Each device sums over its input channels only; the partial results add
  // up, so each adds 1/n of the bias.
  if (op.getBias() && *shards != 1)
    local[2] = scale(builder, op.getLoc(), local[2], 1.0 / *shards);
  return cloneLocal(builder, op, local, types);
}

//===----------------------------------------------------------------------===//
// Sources: constant, iota, rng
//===----------------------------------------------------------------------===//

static PartitionResult partition(ConstantOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr> resultShardings) {
  auto localType = cast<RankedTensorType>(types[0]);
  if (localType == op.getType())
    return cloneLocal(builder, op, operands, types);
  // Every block of a splat is the local splat.
  if (auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
      dense && dense.isSplat()) {
    auto value = ConstantOp::create(builder, op.getLoc(), localType,
                                    dense.resizeSplat(localType));
    value->setDiscardableAttrs(
        op.getOperation()->getDiscardableAttrDictionary());
    return SmallVector<Value>{value};
  }
  // Otherwise the whole constant, sliced: each device keeps its block.
  Value whole = cloneLocal(builder, op, operands, op.getType())[0];
  ShardingAttr sharding = resultShardings[0];
  SmallVector<Attribute> dimAxes;
  for (DimShardingAttr dim : sharding.getDimShardings()) {
    SmallVector<Attribute> axes(dim.getAxes().begin(), dim.getAxes().end());
    dimAxes.push_back(builder.getArrayAttr(axes));
  }
  Value block =
      AllSliceOp::create(builder, op.getLoc(), localType, whole,
                         sharding.getMeshName(), builder.getArrayAttr(dimAxes));
  return SmallVector<Value>{block};
}

static PartitionResult partition(IotaOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr> resultShardings) {
  auto localType = cast<RankedTensorType>(types[0]);
  int64_t dim = op.getDim();
  ArrayRef<StringAttr> axes =
      resultShardings[0].getDimShardings()[dim].getAxes();
  // Sharded along other dimensions only, every block has the same values.
  if (axes.empty())
    return cloneLocal(builder, op, operands, types);
  // The local indices plus the block's offset, in f32 (exact below 2^24)
  // and converted once, so that bf16 rounds like the global iota.
  Location loc = op.getLoc();
  auto f32Type = localType.clone(builder.getF32Type());
  Value indices = cloneLocal(builder, op, operands, {f32Type})[0];
  Value offset = blockOffset(builder, loc, resultShardings[0].getMeshName(),
                             axes, localType.getDimSize(dim));
  Value spread = BroadcastInDimOp::create(builder, loc, f32Type, offset,
                                          builder.getDenseI64ArrayAttr({}));
  Value result = AddOp::create(builder, loc, indices, spread);
  if (f32Type != localType)
    result = ConvertOp::create(builder, loc, localType, result);
  return SmallVector<Value>{result};
}

/// The offsets form of a counter-based rng op `op` (an `OpTy`): each device
/// generates its block of the global tensor.
template <typename OpTy>
static PartitionResult partitionRng(OpTy op, OpBuilder &builder,
                                    TypeRange types, ShardingAttr sharding) {
  auto localType = cast<RankedTensorType>(types[0]);
  if (localType == op.getType())
    return cloneLocal(builder, op, {}, types);
  SmallVector<Value> offsets;
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings()))
    offsets.push_back(blockOffset(builder, op.getLoc(), sharding.getMeshName(),
                                  dimSharding.getAxes(),
                                  localType.getDimSize(dim)));
  auto local =
      cast<OpTy>(cloneLocal(builder, op, offsets, types)[0].getDefiningOp());
  local.setGlobalShape(op.getType().getShape());
  return SmallVector<Value>{local.getResult()};
}

static PartitionResult partition(RngNormalOp op, OpBuilder &builder, ValueRange,
                                 TypeRange types, ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr> resultShardings) {
  if (!op.getOffsets().empty())
    return op.emitOpError("is already in its per-device (offsets) form");
  return partitionRng(op, builder, types, resultShardings[0]);
}

static PartitionResult partition(RngUniformOp op, OpBuilder &builder,
                                 ValueRange, TypeRange types,
                                 ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr> resultShardings) {
  if (!op.getOffsets().empty())
    return op.emitOpError("is already in its per-device (offsets) form");
  return partitionRng(op, builder, types, resultShardings[0]);
}

//===----------------------------------------------------------------------===//
// Annotations
//===----------------------------------------------------------------------===//

static PartitionResult partition(ShardingConstraintOp op, OpBuilder &,
                                 ValueRange operands, TypeRange,
                                 ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr>) {
  // Its operand already has the constrained layout; the constraint ends.
  return SmallVector<Value>{operands[0]};
}

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

namespace {
/// Ops whose result block is the same function of the operand blocks as the
/// global result is of the global operands: cloned with local types.
template <typename OpTy>
struct ClonePartition
    : public PartitionOpInterface::ExternalModel<ClonePartition<OpTy>, OpTy> {
  PartitionResult partition(Operation *op, OpBuilder &builder,
                            ValueRange operands, TypeRange types,
                            ArrayRef<ShardingAttr>,
                            ArrayRef<ShardingAttr>) const {
    return cloneLocal(builder, op, operands, types);
  }
};

/// Ops with a local form of their own: `partition(OpTy, ...)` above.
template <typename OpTy>
struct OwnPartition
    : public PartitionOpInterface::ExternalModel<OwnPartition<OpTy>, OpTy> {
  PartitionResult partition(Operation *op, OpBuilder &builder,
                            ValueRange operands, TypeRange types,
                            ArrayRef<ShardingAttr> operandShardings,
                            ArrayRef<ShardingAttr> resultShardings) const {
    return ::partition(cast<OpTy>(op), builder, operands, types,
                       operandShardings, resultShardings);
  }
};
} // namespace

// Collectives and axis_index exist only after partitioning, and sd-partition
// turns reshards into collectives itself: none of them has a model.
void mlir::sd::registerPartitionModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attachModels<ClonePartition,
                 // Elementwise.
                 SD_ELEMENTWISE_MATH_OPS, CompareOp, SelectOp, ConvertOp,
                 // Shapes along unsharded dimensions, linear algebra, layers.
                 BroadcastInDimOp, ReshapeOp, TransposeOp, ConcatOp, PadOp,
                 DotGeneralOp, LayerNormOp, RmsNormOp, GroupNormOp, SoftmaxOp,
                 AttentionOp, UpsampleNearestOp,
                 // Attention tiles: each device runs its blocks' tiles; a
                 // sharded reduction factor of the backward leaves the local
                 // cotangent as the partial sum.
                 FlashAttentionOp, FlashAttentionDqOp, FlashAttentionDkvOp,
                 // Over a sharded dimension the local sum is the partial sum.
                 ReduceSumOp,
                 // Memory moves: each device moves its own block.
                 OffloadOp, ReloadOp>(*context);
    attachModels<OwnPartition, SliceOp, ReduceMaxOp, ReduceMeanOp, MseLossOp,
                 Conv2DOp, ConstantOp, IotaOp, RngNormalOp, RngUniformOp,
                 ShardingConstraintOp>(*context);
  });
}
