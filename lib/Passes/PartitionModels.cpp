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
#include "PartitionHelpers.h"
#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::partition_detail;

using PartitionResult = FailureOr<SmallVector<Value>>;

//===----------------------------------------------------------------------===//
// Helpers (PartitionHelpers.h)
//===----------------------------------------------------------------------===//

FailureOr<int64_t> partition_detail::axesSize(Operation *op,
                                              ShardingAttr sharding,
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

FailureOr<int64_t> partition_detail::dimsSize(Operation *op,
                                              ShardingAttr sharding,
                                              ArrayRef<int64_t> dims) {
  SmallVector<StringAttr> axes;
  for (int64_t dim : dims) {
    ArrayRef<StringAttr> dimAxes = sharding.getDimShardings()[dim].getAxes();
    axes.append(dimAxes.begin(), dimAxes.end());
  }
  return axesSize(op, sharding, axes);
}

SmallVector<Value> partition_detail::cloneLocal(OpBuilder &builder,
                                                Operation *op,
                                                ValueRange operands,
                                                TypeRange types) {
  Operation *clone = builder.clone(*op);
  clone->setOperands(operands);
  for (auto [result, type] : llvm::zip_equal(clone->getResults(), types))
    result.setType(type);
  return SmallVector<Value>(clone->getResults());
}

Value partition_detail::splat(OpBuilder &builder, Location loc,
                              RankedTensorType type, double value) {
  auto element = FloatAttr::get(type.getElementType(), value);
  return ConstantOp::create(builder, loc, type,
                            DenseElementsAttr::get(type, {Attribute(element)}));
}

Value partition_detail::scale(OpBuilder &builder, Location loc, Value value,
                              double factor) {
  auto type = cast<RankedTensorType>(value.getType());
  return MulOp::create(builder, loc, value, splat(builder, loc, type, factor));
}

Value partition_detail::maskPadding(OpBuilder &builder, Location loc,
                                    Value value, int64_t dim, int64_t size,
                                    FlatSymbolRefAttr mesh,
                                    ArrayRef<StringAttr> axes, int64_t shards) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t extent = type.getDimSize(dim);
  if (extent * shards == size)
    return value;
  // index < size - block · extent, in f32 (exact below 2^24).
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  SmallVector<Attribute> names(axes.begin(), axes.end());
  Value block = AxisIndexOp::create(builder, loc, scalar, mesh,
                                    builder.getArrayAttr(names));
  Value valid =
      SubOp::create(builder, loc, splat(builder, loc, scalar, double(size)),
                    MulOp::create(builder, loc, block,
                                  splat(builder, loc, scalar, double(extent))));
  auto f32Type = type.clone(builder.getF32Type());
  Value positions =
      IotaOp::create(builder, loc, f32Type, builder.getI64IntegerAttr(dim));
  Value bound = BroadcastInDimOp::create(builder, loc, f32Type, valid,
                                         builder.getDenseI64ArrayAttr({}));
  Value keep =
      CompareOp::create(builder, loc, CompareDirection::lt, positions, bound);
  return SelectOp::create(builder, loc, keep, value,
                          splat(builder, loc, type, 0.0));
}

FailureOr<Value>
partition_detail::maskPaddedDims(Operation *op, OpBuilder &builder, Value value,
                                 RankedTensorType global, ShardingAttr sharding,
                                 ArrayRef<int64_t> dims) {
  for (int64_t dim : dims) {
    ArrayRef<StringAttr> axes = sharding.getDimShardings()[dim].getAxes();
    FailureOr<int64_t> shards = axesSize(op, sharding, axes);
    if (failed(shards))
      return failure();
    value =
        maskPadding(builder, op->getLoc(), value, dim, global.getDimSize(dim),
                    sharding.getMeshName(), axes, *shards);
  }
  return value;
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

/// A mean over `dims` of the first operand (global type `global`, local
/// operands with their padding masked by sd-partition): the local mean over
/// the block's elements, times their count over the global count, so that
/// the partial sums add up to the global mean.
static PartitionResult partitionMean(Operation *op, OpBuilder &builder,
                                     ValueRange operands, TypeRange types,
                                     RankedTensorType global,
                                     ArrayRef<int64_t> dims) {
  auto local = cast<RankedTensorType>(operands[0].getType());
  double localCount = 1, globalCount = 1;
  for (int64_t dim : dims) {
    localCount *= double(local.getDimSize(dim));
    globalCount *= double(global.getDimSize(dim));
  }
  SmallVector<Value> results = cloneLocal(builder, op, operands, types);
  if (localCount != globalCount)
    results[0] =
        scale(builder, op->getLoc(), results[0], localCount / globalCount);
  return results;
}

static PartitionResult partition(ReduceMeanOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr>) {
  return partitionMean(op, builder, operands, types,
                       cast<RankedTensorType>(op.getOperand().getType()),
                       op.getDims());
}

// The local sum of squares over the global element count.
static PartitionResult partition(MseLossOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr>,
                                 ArrayRef<ShardingAttr>) {
  auto global = cast<RankedTensorType>(op.getPredictions().getType());
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, global.getRank()));
  return partitionMean(op, builder, operands, types, global, all);
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
  // Otherwise the whole constant, padded to whole blocks and sliced: each
  // device keeps its block.
  Value whole = cloneLocal(builder, op, operands, op.getType())[0];
  ShardingAttr sharding = resultShardings[0];
  SmallVector<int64_t> lows(localType.getRank(), 0), highs;
  FailureOr<int64_t> shards = 1;
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings())) {
    shards = axesSize(op, sharding, dimSharding.getAxes());
    if (failed(shards))
      return failure();
    highs.push_back(localType.getDimSize(dim) * *shards -
                    op.getType().getDimSize(dim));
  }
  if (llvm::any_of(highs, [](int64_t high) { return high != 0; }))
    whole =
        PadOp::create(builder, op.getLoc(), whole, lows, highs, APFloat(0.0));
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
// Context-parallel attention (ring, Ulysses)
//===----------------------------------------------------------------------===//

namespace {
/// The devices a context-parallel attention spreads one sequence over: the
/// mesh axes that shard the query's length (major to minor) and their
/// device count P.
struct SequenceGroup {
  FlatSymbolRefAttr mesh;
  SmallVector<StringRef> axes;
  int64_t size = 1;
};

/// Builds the local form of context-parallel attention ops at `builder`:
/// Ulysses within subgroups of `ulysses` consecutive group members (none
/// for 1), the ring across the P / `ulysses` subgroups (none for 1).
class ContextParallelBuilder {
public:
  ContextParallelBuilder(OpBuilder &builder, Location loc,
                         const SequenceGroup &group, int64_t ulysses)
      : b(builder), loc(loc), group(group), ulysses(ulysses) {}

  /// The hops of the ring: one block per subgroup.
  int64_t ringSize() const { return group.size / ulysses; }

  /// `value` shifted one subgroup along the ring: member i receives member
  /// i − U's block (U = `ulysses`; i − 1 for the plain ring).
  Value shift(Value value) {
    return CollectivePermuteOp::create(
        b, loc, value, group.mesh, group.axes,
        CollectivePermuteOp::getRingShiftPairs(group.size, ulysses));
  }

  /// Moves the subgroups' share of the group's axes from dimension `from`
  /// to dimension `to`.
  Value allToAll(Value value, int64_t from, int64_t to) {
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[from] *= ulysses;
    shape[to] /= ulysses;
    SmallVector<Attribute> axes = llvm::map_to_vector(
        group.axes, [&](StringRef a) -> Attribute { return b.getStringAttr(a); });
    IntegerAttr subgroup =
        ulysses < group.size ? b.getI64IntegerAttr(ulysses) : IntegerAttr();
    return AllToAllOp::create(b, loc, type.clone(shape), value, group.mesh,
                              b.getArrayAttr(axes), b.getI64IntegerAttr(from),
                              b.getI64IntegerAttr(to), subgroup);
  }

  /// The log-sum-exp merge of two partial attentions over disjoint keys.
  std::pair<Value, Value> merge(Value out, Value lse, Value out2,
                                Value lse2) {
    Value top = MaxOp::create(b, loc, lse, lse2);
    Value w1 = ExpOp::create(b, loc, SubOp::create(b, loc, lse, top));
    Value w2 = ExpOp::create(b, loc, SubOp::create(b, loc, lse2, top));
    Value sum = AddOp::create(b, loc, w1, w2);
    Value merged =
        AddOp::create(b, loc, top, LogOp::create(b, loc, sum));
    // out·w1/sum + out2·w2/sum, the weights spread along head_dim.
    auto outType = cast<RankedTensorType>(out.getType());
    auto spread = [&](Value weight) {
      Value ratio = DivOp::create(b, loc, weight, sum);
      if (outType.getElementType() != cast<RankedTensorType>(ratio.getType())
                                          .getElementType())
        ratio = ConvertOp::create(
            b, loc,
            cast<RankedTensorType>(ratio.getType())
                .clone(outType.getElementType()),
            ratio);
      return BroadcastInDimOp::create(b, loc, outType, ratio,
                                      b.getDenseI64ArrayAttr({0, 1, 2}));
    };
    Value result =
        AddOp::create(b, loc, MulOp::create(b, loc, out, spread(w1)),
                      MulOp::create(b, loc, out2, spread(w2)));
    return {result, merged};
  }

  OpBuilder &b;
  Location loc;
  const SequenceGroup &group;
  int64_t ulysses;
};
} // namespace

/// The sequence group of a context-parallel attention op whose query has
/// sharding `query`; P = 1 when its length is not sharded.
static FailureOr<SequenceGroup> sequenceGroup(Operation *op,
                                              ShardingAttr query) {
  SequenceGroup group;
  group.mesh = query.getMeshName();
  for (StringAttr axis : query.getDimShardings()[2].getAxes())
    group.axes.push_back(axis.getValue());
  FailureOr<int64_t> size =
      axesSize(op, query, query.getDimShardings()[2].getAxes());
  if (failed(size))
    return failure();
  group.size = *size;
  return group;
}

/// The devices per Ulysses group of `op`'s context parallelism: 1 for the
/// ring, P for Ulysses, `ulysses_shards` for the hybrid, which must divide
/// P; the local heads must split over them.
template <typename OpTy>
static FailureOr<int64_t> ulyssesGroupSize(OpTy op, Value localQuery,
                                           const SequenceGroup &group) {
  ContextParallel kind = *op.getContextParallel();
  int64_t u = 1;
  if (kind == ContextParallel::ulysses)
    u = group.size;
  if (kind == ContextParallel::ulysses_ring) {
    u = static_cast<int64_t>(op.getUlyssesShards().value_or(1));
    if (group.size % u != 0)
      return op->emitOpError("cannot use ulysses_ring attention: "
                             "ulysses_shards ")
             << u << " does not divide the " << group.size
             << " devices that shard the sequence (mesh axes "
             << llvm::join(group.axes, ", ") << ")";
  }
  int64_t heads = cast<RankedTensorType>(localQuery.getType()).getDimSize(1);
  if (heads % u == 0)
    return u;
  InFlightDiagnostic diag = op->emitOpError("cannot use ")
                            << stringifyContextParallel(kind)
                            << " attention: " << heads
                            << " heads per device are not divisible by ";
  if (kind == ContextParallel::ulysses)
    diag << "the " << u << " devices that shard the sequence (mesh axes "
         << llvm::join(group.axes, ", ")
         << "); use ring attention or a mesh whose context degree divides "
            "the heads";
  else
    diag << "ulysses_shards " << u
         << "; use a ulysses_shards that divides the heads, or ring attention";
  return diag;
}

/// The local attention op of `op`'s kind on local operands, without the
/// context-parallel attribute (what one device computes).
template <typename OpTy>
static Operation *localAttention(OpBuilder &b, OpTy op, ValueRange operands,
                                 TypeRange types) {
  Operation *local = b.clone(*op.getOperation());
  local->setOperands(operands);
  local->removeAttr(op.getContextParallelAttrName());
  local->removeAttr(op.getUlyssesShardsAttrName());
  for (auto [result, type] : llvm::zip_equal(local->getResults(), types))
    result.setType(type);
  return local;
}

/// Local types with dimension 1 (heads) divided and 2 (sequence)
/// multiplied by the group size: what a device holds after Ulysses' move.
static SmallVector<Type> headShardedTypes(TypeRange types, int64_t p) {
  return llvm::map_to_vector(types, [&](Type type) -> Type {
    auto t = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(t.getShape());
    shape[1] /= p;
    shape[2] *= p;
    return t.clone(shape);
  });
}

/// The sequence group `op` spreads over: none (`group` unset) when the op
/// is not context-parallel or its sequence is not sharded.
template <typename OpTy>
static LogicalResult contextParallelGroup(OpTy op, ShardingAttr query,
                                          std::optional<SequenceGroup> &group) {
  if (!op.getContextParallel())
    return success();
  FailureOr<SequenceGroup> found = sequenceGroup(op, query);
  if (failed(found))
    return failure();
  if (found->size > 1)
    group = *found;
  return success();
}

/// Ulysses (within subgroups, for the hybrid): every operand's sequence
/// moves to its heads (the log-sum-exp [B, H, S] like the others), `local`
/// attends the subgroup's whole sequence of its heads, and every result
/// moves back.
static SmallVector<Value>
ulysses(ContextParallelBuilder &cp, ValueRange operands, TypeRange types,
        function_ref<SmallVector<Value>(ValueRange, TypeRange)> local) {
  SmallVector<Value> moved = llvm::map_to_vector(
      operands, [&](Value v) { return cp.allToAll(v, 2, 1); });
  SmallVector<Value> results =
      local(moved, headShardedTypes(types, cp.ulysses));
  return llvm::map_to_vector(results,
                             [&](Value r) { return cp.allToAll(r, 1, 2); });
}

/// Ring: one block of keys and values (operands 1 and 2) per subgroup
/// passes by (P blocks for the plain ring), the next block's permute issued
/// before the current block's tiles (sd-async-collectives then overlaps
/// them). The first block's results start the accumulators; `combine` folds
/// each later block's results into them, and `betweenBlocks` runs on them
/// before the next block arrives.
template <typename OpTy>
static SmallVector<Value>
ringBlocks(ContextParallelBuilder &cp, OpTy op, ValueRange operands,
           TypeRange types,
           function_ref<void(SmallVector<Value> &, ValueRange)> combine,
           function_ref<void(SmallVector<Value> &)> betweenBlocks) {
  SmallVector<Value> args(operands);
  SmallVector<Value> acc;
  int64_t size = cp.ringSize();
  for (int64_t step = 0; step < size; ++step) {
    Value nextK, nextV;
    if (step + 1 < size) {
      nextK = cp.shift(args[1]);
      nextV = cp.shift(args[2]);
    }
    Operation *local = localAttention(cp.b, op, args, types);
    if (step == 0)
      acc.assign(local->getResults().begin(), local->getResults().end());
    else
      combine(acc, local->getResults());
    if (step + 1 < size) {
      args[1] = nextK;
      args[2] = nextV;
      betweenBlocks(acc);
    }
  }
  return acc;
}

/// The forward ring: each block's output and log-sum-exp merge into the
/// running pair.
static SmallVector<Value> ring(ContextParallelBuilder &cp, FlashAttentionOp op,
                               ValueRange operands, TypeRange types) {
  return ringBlocks(
      cp, op, operands, types,
      [&](SmallVector<Value> &acc, ValueRange part) {
        std::tie(acc[0], acc[1]) = cp.merge(acc[0], acc[1], part[0], part[1]);
      },
      [](SmallVector<Value> &) {});
}

/// The backward ring: dQ sums each block's share; dK and dV travel with
/// their block.
template <typename OpTy>
static SmallVector<Value> ring(ContextParallelBuilder &cp, OpTy op,
                               ValueRange operands, TypeRange types) {
  constexpr bool kIsDq = std::is_same_v<OpTy, FlashAttentionDqOp>;
  auto travel = [&](SmallVector<Value> &acc) {
    if (!kIsDq)
      for (Value &sum : acc)
        sum = cp.shift(sum);
  };
  SmallVector<Value> acc = ringBlocks(
      cp, op, operands, types,
      [&](SmallVector<Value> &sums, ValueRange part) {
        for (auto [sum, p] : llvm::zip_equal(sums, part))
          sum = AddOp::create(cp.b, op.getLoc(), sum, p);
      },
      travel);
  // After P − 1 hops a device holds the next device's block's dK, dV: one
  // more hop brings each home.
  travel(acc);
  return acc;
}

/// `value` [b, h, s, d] with its sequence (dimension 2, padded blocks of a
/// `length`-long sequence over `group`) gathered whole.
static Value gatherSequence(OpBuilder &b, Location loc, Value value,
                            const SequenceGroup &group, int64_t length) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[2] *= group.size;
  SmallVector<Attribute> dims(type.getRank(), b.getArrayAttr({}));
  dims[2] = b.getStrArrayAttr(group.axes);
  Value gathered = AllGatherOp::create(b, loc, type.clone(shape), value,
                                       group.mesh, b.getArrayAttr(dims));
  SmallVector<int64_t> start(shape.size(), 0), limit(shape),
      strides(shape.size(), 1);
  limit[2] = shape[2] = length;
  return SliceOp::create(b, loc, type.clone(shape), gathered, start, limit,
                         strides);
}

/// A context-parallel attention op whose sequence the group's devices do
/// not divide: each device attends with its (padded) block of queries to
/// the whole sequence's keys and values, gathered and cut to their length
/// (the ring and Ulysses move equal blocks, whose padding would be
/// attended). dK and dV sum each device's queries, their padding masked,
/// and are reduced and scattered back into padded blocks.
template <typename OpTy>
static PartitionResult gatheredKeys(OpBuilder &b, OpTy op, ValueRange operands,
                                    TypeRange types, const SequenceGroup &group,
                                    int64_t length) {
  Location loc = op.getLoc();
  SmallVector<Value> args(operands);
  args[1] = gatherSequence(b, loc, args[1], group, length);
  args[2] = gatherSequence(b, loc, args[2], group, length);
  if constexpr (!std::is_same_v<OpTy, FlashAttentionDkvOp>) {
    Operation *local = localAttention(b, op, args, types);
    return SmallVector<Value>(local->getResults());
  } else {
    SmallVector<StringAttr> axes = llvm::map_to_vector(
        group.axes, [&](StringRef axis) { return b.getStringAttr(axis); });
    // The query-indexed operands: query, out, log-sum-exp, dO.
    for (int64_t i : {0, 3, 4, 5})
      args[i] =
          maskPadding(b, loc, args[i], 2, length, group.mesh, axes, group.size);
    SmallVector<Type> whole = llvm::map_to_vector(types, [&](Type type) {
      auto t = cast<RankedTensorType>(type);
      SmallVector<int64_t> shape(t.getShape());
      shape[2] = length;
      return Type(t.clone(shape));
    });
    Operation *local = localAttention(b, op, args, whole);
    SmallVector<Value> results;
    for (auto [partial, type] : llvm::zip_equal(local->getResults(), types)) {
      auto t = cast<RankedTensorType>(type);
      SmallVector<int64_t> lows(t.getRank(), 0), highs(t.getRank(), 0);
      highs[2] = t.getDimSize(2) * group.size - length;
      Value padded = PadOp::create(b, loc, partial, lows, highs, APFloat(0.0));
      SmallVector<Attribute> dims(t.getRank(), b.getArrayAttr({}));
      dims[2] = b.getStrArrayAttr(group.axes);
      results.push_back(ReduceScatterOp::create(b, loc, t, padded, group.mesh,
                                                b.getArrayAttr(dims)));
    }
    return results;
  }
}

/// A flash attention op, forward or backward, spread over the devices that
/// shard its sequence (the query's, sharded as `query`) by the ring,
/// Ulysses or both; cloned with local types when it is not
/// context-parallel.
template <typename OpTy>
static PartitionResult
partitionContextParallel(OpTy op, OpBuilder &builder, ValueRange operands,
                         TypeRange types, ShardingAttr query) {
  std::optional<SequenceGroup> group;
  if (failed(contextParallelGroup(op, query, group)))
    return failure();
  if (!group)
    return cloneLocal(builder, op, operands, types);
  int64_t length =
      cast<RankedTensorType>(op.getQuery().getType()).getDimSize(2);
  if (length % group->size != 0)
    return gatheredKeys(builder, op, operands, types, *group, length);
  FailureOr<int64_t> u = ulyssesGroupSize(op, operands[0], *group);
  if (failed(u))
    return failure();
  ContextParallelBuilder cp(builder, op.getLoc(), *group, *u);
  auto local = [&](ValueRange args, TypeRange localTypes) {
    if (cp.ringSize() > 1)
      return ring(cp, op, args, localTypes);
    Operation *attention = localAttention(cp.b, op, args, localTypes);
    return SmallVector<Value>(attention->getResults());
  };
  if (*u == 1)
    return local(operands, types);
  return ulysses(cp, operands, types, local);
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
using OwnPartition = FunctionPartition<OpTy, &::partition>;

/// Flash attention ops, forward and backward: `partitionContextParallel`.
template <typename OpTy>
struct ContextParallelPartition
    : public PartitionOpInterface::ExternalModel<ContextParallelPartition<OpTy>,
                                                 OpTy> {
  PartitionResult partition(Operation *op, OpBuilder &builder,
                            ValueRange operands, TypeRange types,
                            ArrayRef<ShardingAttr> operandShardings,
                            ArrayRef<ShardingAttr>) const {
    return partitionContextParallel(cast<OpTy>(op), builder, operands, types,
                                    operandShardings[0]);
  }
};
} // namespace

// Collectives and axis_index exist only after partitioning, and sd-partition
// turns reshards into collectives itself: none of them has a model.
void mlir::sd::registerPartitionModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attachModels<
        ClonePartition,
        // Elementwise.
        SD_ELEMENTWISE_MATH_OPS, CompareOp, SelectOp, ConvertOp, AdamWOp,
        // Shapes along unsharded dimensions, linear algebra, layers.
        BroadcastInDimOp, ReshapeOp, TransposeOp, ConcatOp, PadOp, DotGeneralOp,
        LayerNormOp, RmsNormOp, SoftmaxOp, AttentionOp, UpsampleNearestOp,
        // Over a sharded dimension the local sum is the partial sum.
        ReduceSumOp,
        // Memory moves: each device moves its own block.
        OffloadOp, ReloadOp>(*context);
    // Attention tiles: each device runs its blocks' tiles (a sharded
    // reduction factor of the backward leaves the local cotangent as the
    // partial sum); context-parallel ones spread the sequence themselves.
    attachModels<ContextParallelPartition, FlashAttentionOp, FlashAttentionDqOp,
                 FlashAttentionDkvOp>(*context);
    attachModels<OwnPartition, SliceOp, ReduceMaxOp, ReduceMeanOp, MseLossOp,
                 ConstantOp, IotaOp, RngNormalOp, RngUniformOp,
                 ShardingConstraintOp>(*context);
    attachSpatialPartitionModels(*context);
  });
}
