//===- PartitionSpatial.cpp - halo exchange for spatially sharded images --===//
//
// The partition models of the ops whose image rows (or columns) may be
// split over devices, as GSPMD's spatial partitioning splits them:
//
// * sd.conv2d and sd.conv2d_filter_grad read, for a device's block of output
//   rows, `top` input rows above its block and `k - s - top` below it (a
//   `k`-tall kernel, stride `s`, top padding `top`). Each device sends its
//   boundary rows to its neighbours with `sd.collective_permute` and runs
//   the convolution on its block extended by the rows it received, without
//   padding on that dimension; the first and last devices zero what they
//   would have received, which is the global zero padding.
// * sd.conv2d_input_grad is the transpose: each device computes the
//   gradient of its extended block, sends the rows that belong to its
//   neighbours back to them, and adds what it receives.
// * sd.group_norm over sharded pixels sums its statistics on each device
//   and adds them with `sd.all_reduce`.
//
// Width is exchanged after height, on the block already extended in height,
// so that the corner pixels travel with it.
//
//===----------------------------------------------------------------------===//

#include "PartitionHelpers.h"

#include "sd/IR/SDOps.h"
#include "sd/Passes/PartitionModels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::partition_detail;

using PartitionResult = FailureOr<SmallVector<Value>>;

namespace {
/// A dimension split over mesh axes: what a halo exchange along it needs.
struct SplitDim {
  int64_t dim;
  FlatSymbolRefAttr mesh;
  SmallVector<StringAttr> axes;
  /// The devices along the axes (the group size).
  int64_t devices;
};

/// Builds the local ops of one exchange.
class HaloBuilder {
public:
  HaloBuilder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  /// `count` rows of `x` along `dim` from `start`.
  Value rows(Value x, int64_t dim, int64_t start, int64_t count) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> first(type.getRank(), 0), limit(type.getShape()),
        strides(type.getRank(), 1), shape(type.getShape());
    first[dim] = start;
    limit[dim] = start + count;
    shape[dim] = count;
    return SliceOp::create(b, loc, type.clone(shape), x, first, limit, strides);
  }

  /// `x` with `low` zero rows before and `high` after along `dim`.
  Value padRows(Value x, int64_t dim, int64_t low, int64_t high) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> lows(type.getRank(), 0), highs(type.getRank(), 0);
    lows[dim] = low;
    highs[dim] = high;
    return PadOp::create(b, loc, x, lows, highs, APFloat(0.0));
  }

  /// `block` sent one member along the split axes: forward (to member
  /// i + 1) or back (to i - 1). The member that nothing reaches (the first
  /// when sending forward, the last when sending back) gets zeros.
  Value shift(Value block, const SplitDim &split, bool forward) {
    SmallVector<std::pair<int64_t, int64_t>> pairs;
    for (int64_t i = 0; i + 1 < split.devices; ++i)
      pairs.push_back(forward ? std::make_pair(i, i + 1)
                              : std::make_pair(i + 1, i));
    SmallVector<StringRef> axes = llvm::map_to_vector(
        split.axes, [](StringAttr axis) { return axis.getValue(); });
    auto permute =
        CollectivePermuteOp::create(b, loc, block, split.mesh, axes, pairs);
    permute->setAttr(SDDialect::kHaloAttrName, b.getUnitAttr());
    // keep = min(index, 1) forward, min(last - index, 1) back: 0 on the
    // member nobody sends to, 1 elsewhere.
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Attribute> names(split.axes.begin(), split.axes.end());
    Value index =
        AxisIndexOp::create(b, loc, scalar, split.mesh, b.getArrayAttr(names));
    if (!forward)
      index = SubOp::create(
          b, loc, splat(b, loc, scalar, double(split.devices - 1)), index);
    Value keep = MinOp::create(b, loc, index, splat(b, loc, scalar, 1.0));
    auto type = cast<RankedTensorType>(block.getType());
    if (type.getElementType() != scalar.getElementType())
      keep =
          ConvertOp::create(b, loc, scalar.clone(type.getElementType()), keep);
    Value spread = BroadcastInDimOp::create(b, loc, type, keep,
                                            b.getDenseI64ArrayAttr({}));
    return MulOp::create(b, loc, permute.getResult(), spread);
  }

  /// `x` extended along the split dimension by the `before` last rows of
  /// the previous member and the `after` first rows of the next (zeros at
  /// the ends of the group); a negative `after` drops rows instead.
  Value extend(Value x, const SplitDim &split, int64_t before, int64_t after) {
    int64_t dim = split.dim;
    int64_t size = cast<RankedTensorType>(x.getType()).getDimSize(dim);
    SmallVector<Value> parts;
    if (before > 0)
      parts.push_back(shift(rows(x, dim, size - before, before), split,
                            /*forward=*/true));
    parts.push_back(after < 0 ? rows(x, dim, 0, size + after) : x);
    if (after > 0)
      parts.push_back(shift(rows(x, dim, 0, after), split, /*forward=*/false));
    if (parts.size() == 1)
      return parts.front();
    return ConcatOp::create(b, loc, parts, static_cast<uint64_t>(dim));
  }

  /// The transpose of `extend`: `x` is a gradient of the extended block;
  /// its first `before` rows are added to the previous member's last rows,
  /// its last `after` rows to the next member's first rows, and the block's
  /// own rows returned with what its neighbours added.
  Value reduceExtension(Value x, const SplitDim &split, int64_t before,
                        int64_t after) {
    int64_t dim = split.dim;
    if (after < 0) {
      x = padRows(x, dim, 0, -after);
      after = 0;
    }
    int64_t size =
        cast<RankedTensorType>(x.getType()).getDimSize(dim) - before - after;
    Value own = rows(x, dim, before, size);
    if (before > 0) {
      Value fromNext = shift(rows(x, dim, 0, before), split, /*forward=*/false);
      own =
          AddOp::create(b, loc, own, padRows(fromNext, dim, size - before, 0));
    }
    if (after > 0) {
      Value fromPrevious =
          shift(rows(x, dim, before + size, after), split, /*forward=*/true);
      own = AddOp::create(b, loc, own,
                          padRows(fromPrevious, dim, 0, size - after));
    }
    return own;
  }

private:
  OpBuilder &b;
  Location loc;
};

/// The halo of one spatial dimension of a convolution: the rows above
/// (`before`) and below (`after`, negative when the block's last rows are
/// not read) a device's block that its output rows read.
struct Halo {
  SplitDim split;
  int64_t before, after;
};
} // namespace

/// The halos of a convolution whose forward input `x` (global and local
/// types) is laid out as `sharding`, with kernel sizes `kernel`, `strides`
/// and `padding`; an error on `op` where a halo is taller than the block.
static FailureOr<SmallVector<Halo>>
convHalos(Operation *op, ShardingAttr sharding, RankedTensorType localX,
          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
          ArrayRef<int64_t> padding) {
  SmallVector<Halo> halos;
  for (int64_t dim : {1, 2}) {
    ArrayRef<StringAttr> axes = sharding.getDimShardings()[dim].getAxes();
    if (axes.empty())
      continue;
    FailureOr<int64_t> devices = axesSize(op, sharding, axes);
    if (failed(devices))
      return failure();
    int64_t k = kernel[dim - 1], s = strides[dim - 1];
    int64_t before = padding[2 * (dim - 1)], after = k - s - before;
    int64_t block = localX.getDimSize(dim);
    if (before > block || after > block)
      return op->emitOpError("cannot exchange a halo of ")
             << std::max(before, after) << " "
             << (dim == 1 ? "rows" : "columns") << " between the " << *devices
             << " devices that split the image's "
             << (dim == 1 ? "height" : "width") << " (mesh axes "
             << llvm::join(llvm::map_range(
                               axes, [](StringAttr a) { return a.getValue(); }),
                           ", ")
             << "): each holds " << block
             << ", fewer than the kernel reads; split it over fewer devices";
    halos.push_back(
        {{dim, sharding.getMeshName(), SmallVector<StringAttr>(axes), *devices},
         before,
         after});
  }
  return halos;
}

/// `padding` without the padding of the halo dimensions, which the
/// exchanged rows replace.
static SmallVector<int64_t> withoutHaloPadding(ArrayRef<int64_t> padding,
                                               ArrayRef<Halo> halos) {
  SmallVector<int64_t> local(padding);
  for (const Halo &halo : halos) {
    local[2 * (halo.split.dim - 1)] = 0;
    local[2 * (halo.split.dim - 1) + 1] = 0;
  }
  return local;
}

/// `x` extended by every halo in turn.
static Value extendAll(HaloBuilder &hb, Value x, ArrayRef<Halo> halos) {
  for (const Halo &halo : halos)
    x = hb.extend(x, halo.split, halo.before, halo.after);
  return x;
}

static PartitionResult partition(Conv2DOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  SmallVector<Value> local(operands);
  FailureOr<int64_t> shards = dimsSize(op, operandShardings[0], {3});
  FailureOr<SmallVector<Halo>> halos = convHalos(
      op, operandShardings[0], cast<RankedTensorType>(operands[0].getType()),
      op.getKernel().getType().getShape(), op.getStrides(), op.getPadding());
  if (failed(shards) || failed(halos))
    return failure();
  // Each device sums over its input channels only; the partial results add
  // up, so each adds 1/n of the bias.
  if (op.getBias() && *shards != 1)
    local[2] = scale(builder, op.getLoc(), local[2], 1.0 / *shards);
  // Padded pixels read as the image's zero padding.
  FailureOr<Value> x = maskPaddedDims(
      op, builder, local[0], cast<RankedTensorType>(op.getInput().getType()),
      operandShardings[0], {1, 2});
  if (failed(x))
    return failure();
  HaloBuilder hb(builder, op.getLoc());
  local[0] = extendAll(hb, *x, *halos);
  auto conv =
      cast<Conv2DOp>(cloneLocal(builder, op, local, types)[0].getDefiningOp());
  conv.setPadding(withoutHaloPadding(op.getPadding(), *halos));
  return SmallVector<Value>{conv.getResult()};
}

static PartitionResult partition(Conv2DFilterGradOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  FailureOr<SmallVector<Halo>> halos = convHalos(
      op, operandShardings[0], cast<RankedTensorType>(operands[0].getType()),
      op.getKernelGrad().getType().getShape(), op.getStrides(),
      op.getPadding());
  if (failed(halos))
    return failure();
  // The local kernel gradient of the extended block is this device's
  // summand (the spatial factors are reduction factors).
  HaloBuilder hb(builder, op.getLoc());
  SmallVector<Value> local(operands);
  local[0] = extendAll(hb, local[0], *halos);
  auto grad = cast<Conv2DFilterGradOp>(
      cloneLocal(builder, op, local, types)[0].getDefiningOp());
  grad.setPadding(withoutHaloPadding(op.getPadding(), *halos));
  return SmallVector<Value>{grad.getResult()};
}

static PartitionResult partition(Conv2DInputGradOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr> resultShardings) {
  auto localX = cast<RankedTensorType>(types[0]);
  // The padded pixels' gradients are not the neighbours' to add.
  SmallVector<Value> local(operands);
  FailureOr<Value> dy = maskPaddedDims(
      op, builder, local[0], cast<RankedTensorType>(op.getOperand(0).getType()),
      operandShardings[0], {1, 2});
  if (failed(dy))
    return failure();
  local[0] = *dy;
  FailureOr<SmallVector<Halo>> halos = convHalos(
      op, resultShardings[0], localX, op.getKernel().getType().getShape(),
      op.getStrides(), op.getPadding());
  if (failed(halos))
    return failure();
  // The gradient of the extended block, then each halo's rows sent back to
  // the neighbour they belong to, the last exchange (width) first.
  SmallVector<int64_t> extended(localX.getShape());
  for (const Halo &halo : *halos)
    extended[halo.split.dim] += halo.before + halo.after;
  auto grad = cast<Conv2DInputGradOp>(
      cloneLocal(builder, op, local, {localX.clone(extended)})[0]
          .getDefiningOp());
  grad.setPadding(withoutHaloPadding(op.getPadding(), *halos));
  HaloBuilder hb(builder, op.getLoc());
  Value result = grad.getResult();
  for (const Halo &halo : llvm::reverse(*halos))
    result = hb.reduceExtension(result, halo.split, halo.before, halo.after);
  return SmallVector<Value>{result};
}

//===----------------------------------------------------------------------===//
// Group norm
//===----------------------------------------------------------------------===//

/// Group norm with its pixels split: the sums of each sample's group,
/// added over the devices that hold its pixels, give the mean and then the
/// variance (two passes, as the kernel computes them), in f32.
static PartitionResult partition(GroupNormOp op, OpBuilder &builder,
                                 ValueRange operands, TypeRange types,
                                 ArrayRef<ShardingAttr> operandShardings,
                                 ArrayRef<ShardingAttr>) {
  ShardingAttr sharding = operandShardings[0];
  auto global = op.getOperand().getType();
  int64_t rank = global.getRank();
  SmallVector<StringRef> axes;
  for (int64_t dim = 1; dim + 1 < rank; ++dim)
    for (StringAttr axis : sharding.getDimShardings()[dim].getAxes())
      axes.push_back(axis.getValue());
  if (axes.empty())
    return cloneLocal(builder, op, operands, types);

  Location loc = op.getLoc();
  OpBuilder &b = builder;
  auto localType = cast<RankedTensorType>(operands[0].getType());
  Type f32 = b.getF32Type();
  int64_t n = localType.getDimSize(0), channels = localType.getShape().back();
  int64_t groups = op.getNumGroups(), perGroup = channels / groups;
  int64_t positions = localType.getNumElements() / (n * channels);
  // The elements of one sample's group, over all devices.
  double count =
      double(global.getNumElements()) / double(global.getDimSize(0) * groups);
  // [n, positions, groups, C/groups] in f32; statistics [n, groups].
  auto view = RankedTensorType::get({n, positions, groups, perGroup}, f32);
  auto stats = RankedTensorType::get({n, groups}, f32);
  // Padded pixels add nothing to the sums: masked in the operand's layout.
  SmallVector<int64_t> pixelDims =
      llvm::to_vector(llvm::seq<int64_t>(1, rank - 1));
  auto maskPixels = [&](Value v) -> FailureOr<Value> {
    return maskPaddedDims(op, b, v, global.clone(f32), sharding, pixelDims);
  };
  Value x = operands[0];
  if (localType.getElementType() != f32)
    x = ConvertOp::create(b, loc, localType.clone(f32), x);
  FailureOr<Value> maskedX = maskPixels(x);
  if (failed(maskedX))
    return failure();
  bool padded = *maskedX != x;
  x = ReshapeOp::create(b, loc, view, *maskedX);
  auto groupMean = [&](Value v) -> Value {
    Value sum =
        ReduceSumOp::create(b, loc, stats, v, b.getDenseI64ArrayAttr({1, 3}));
    sum = AllReduceOp::create(b, loc, sum, sharding.getMeshName(),
                              b.getStrArrayAttr(axes));
    return scale(b, loc, sum, 1.0 / count);
  };
  auto spread = [&](Value v) -> Value {
    return BroadcastInDimOp::create(b, loc, view, v,
                                    b.getDenseI64ArrayAttr({0, 2}));
  };
  Value centered = SubOp::create(b, loc, x, spread(groupMean(x)));
  Value squares = MulOp::create(b, loc, centered, centered);
  if (padded) {
    FailureOr<Value> masked =
        maskPixels(ReshapeOp::create(b, loc, localType.clone(f32), squares));
    if (failed(masked))
      return failure();
    squares = ReshapeOp::create(b, loc, view, *masked);
  }
  Value variance = groupMean(squares);
  Value epsilon = splat(b, loc, stats, op.getEpsilon().convertToDouble());
  Value inverse =
      RsqrtOp::create(b, loc, AddOp::create(b, loc, variance, epsilon));
  Value y = MulOp::create(b, loc, centered, spread(inverse));
  auto resultType = cast<RankedTensorType>(types[0]);
  y = ReshapeOp::create(b, loc, resultType.clone(f32), y);
  if (resultType.getElementType() != f32)
    y = ConvertOp::create(b, loc, resultType, y);
  auto perChannel = [&](Value v) -> Value {
    return BroadcastInDimOp::create(b, loc, resultType, v,
                                    b.getDenseI64ArrayAttr({rank - 1}));
  };
  if (Value scaleOperand = op.getScale() ? operands[1] : Value())
    y = MulOp::create(b, loc, y, perChannel(scaleOperand));
  if (op.getBias())
    y = AddOp::create(b, loc, y, perChannel(operands.back()));
  return SmallVector<Value>{y};
}

namespace {
/// Ops whose local form is `partition(OpTy, ...)` above.
template <typename OpTy>
using SpatialPartition = FunctionPartition<OpTy, &::partition>;
} // namespace

void mlir::sd::partition_detail::attachSpatialPartitionModels(
    MLIRContext &context) {
  attachModels<SpatialPartition, Conv2DOp, Conv2DInputGradOp,
               Conv2DFilterGradOp, GroupNormOp>(context);
}
