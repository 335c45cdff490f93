//===- OptimizeCollectives.cpp - fewer and cheaper collectives ------------===//
//
// Rewrite patterns on the collectives of a partitioned program (see the
// pass description in Passes.td): no-ops are dropped, chains of one kind
// merge, gathers and slices of the same axes cancel, an all-reduce whose
// result is sliced becomes a reduce-scatter, and the sum of two all-reduces
// is one all-reduce of the sum. Each pattern only looks at one op and the
// ops that produce its operands.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sd {
#define GEN_PASS_DEF_OPTIMIZECOLLECTIVES
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {
using AxisNames = SmallVector<StringRef>;
using DimAxes = SmallVector<AxisNames>;
} // namespace

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static ArrayAttr toAttr(MLIRContext *ctx, ArrayRef<StringRef> axes) {
  SmallVector<Attribute> names;
  for (StringRef axis : axes)
    names.push_back(StringAttr::get(ctx, axis));
  return ArrayAttr::get(ctx, names);
}

static ArrayAttr toAttr(MLIRContext *ctx, const DimAxes &dims) {
  SmallVector<Attribute> result;
  for (const AxisNames &axes : dims)
    result.push_back(toAttr(ctx, axes));
  return ArrayAttr::get(ctx, result);
}

static AxisNames toNames(ArrayAttr axes) {
  return llvm::to_vector(llvm::map_range(
      axes, [](Attribute axis) { return cast<StringAttr>(axis).getValue(); }));
}

static bool isEmpty(const DimAxes &dims) {
  return llvm::all_of(dims, [](const AxisNames &axes) { return axes.empty(); });
}

/// The product of the sizes of `axes` in the mesh `op` names (1 for axes the
/// verifier would reject).
static int64_t axesSize(Operation *op, FlatSymbolRefAttr meshName,
                        ArrayRef<StringRef> axes) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, meshName);
  int64_t size = 1;
  for (StringRef name : axes)
    if (MeshAxisAttr axis = mesh ? mesh.getMesh().getAxis(name) : nullptr)
      size *= axis.getSize();
  return size;
}

/// `axes` without those of size 1.
static AxisNames dropUnitAxes(Operation *op, FlatSymbolRefAttr meshName,
                              ArrayRef<StringRef> axes) {
  AxisNames kept;
  for (StringRef axis : axes)
    if (axesSize(op, meshName, {axis}) != 1)
      kept.push_back(axis);
  return kept;
}

/// `type` with each dimension divided by the size of its `dims` axes.
static RankedTensorType splitType(Operation *op, FlatSymbolRefAttr meshName,
                                  RankedTensorType type, const DimAxes &dims) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, axes] : llvm::enumerate(dims))
    shape[dim] /= axesSize(op, meshName, axes);
  return type.clone(shape);
}

//===----------------------------------------------------------------------===//
// No-ops
//===----------------------------------------------------------------------===//

namespace {
/// all_gather, all_slice, reduce_scatter without their size-1 axes.
template <typename OpTy>
struct DropUnitAxesPerDim : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    DimAxes dims = op.getAxesPerDim(), kept;
    for (const AxisNames &axes : dims)
      kept.push_back(dropUnitAxes(op, op.getMeshAttr(), axes));
    if (kept == dims)
      return failure();
    if (isEmpty(kept)) {
      rewriter.replaceOp(op, op.getOperand());
      return success();
    }
    rewriter.modifyOpInPlace(
        op, [&] { op.setDimAxesAttr(toAttr(op.getContext(), kept)); });
    return success();
  }
};

/// Drops size-1 axes from a collective's flat axis list (all_reduce's
/// reduction axes, all_to_all's axes); `set` stores what is kept, and an
/// op left with no axes is replaced by its operand.
template <typename OpTy>
static LogicalResult dropUnitAxesFlat(OpTy op, ArrayAttr axesAttr,
                                      PatternRewriter &rewriter,
                                      function_ref<void(ArrayAttr)> set) {
  AxisNames axes = toNames(axesAttr);
  AxisNames kept = dropUnitAxes(op, op.getMeshAttr(), axes);
  if (kept == axes)
    return failure();
  if (kept.empty())
    rewriter.replaceOp(op, op.getOperand());
  else
    rewriter.modifyOpInPlace(op, [&] { set(toAttr(op.getContext(), kept)); });
  return success();
}

struct DropUnitAxesAllReduce : public OpRewritePattern<AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllReduceOp op,
                                PatternRewriter &rewriter) const override {
    return dropUnitAxesFlat(op, op.getReductionAxes(), rewriter,
                            [&](ArrayAttr a) { op.setReductionAxesAttr(a); });
  }
};

/// all_to_all and collective_permute, whose axes are `axes`. Size-1 axes
/// add nothing to a member's row-major index, so a permute's pairs stay as
/// they are (all [0, 0] when no axis is left).
template <typename OpTy>
struct DropUnitAxesNamed : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    return dropUnitAxesFlat(op, op.getAxes(), rewriter,
                            [&](ArrayAttr a) { op.setAxesAttr(a); });
  }
};

/// A pair `[s, s]` keeps member s's block where it is, as no pair would:
/// such pairs go, and a permute left without pairs is its operand.
struct DropIdentityPermute : public OpRewritePattern<CollectivePermuteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CollectivePermuteOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<int64_t> moving;
    for (auto [source, target] : op.getPairList())
      if (source != target)
        moving.append({source, target});
    if (moving.empty()) {
      rewriter.replaceOp(op, op.getOperand());
      return success();
    }
    if (moving.size() == op.getPairs().size())
      return failure();
    rewriter.modifyOpInPlace(
        op, [&] { op.setPairsAttr(rewriter.getDenseI64ArrayAttr(moving)); });
    return success();
  }
};

/// A second collective identical to an earlier one of the same value.
template <typename OpTy>
struct DeduplicateCollective : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    for (Operation *user : op.getOperand().getUsers()) {
      if (user == op || user->getBlock() != op->getBlock() ||
          !user->isBeforeInBlock(op) ||
          !OperationEquivalence::isEquivalentTo(
              user, op, OperationEquivalence::IgnoreLocations))
        continue;
      rewriter.replaceOp(op, user->getResults());
      return success();
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// Chains of one kind
//===----------------------------------------------------------------------===//

/// all_gather(all_gather(x, A), B) = all_gather(x, B ++ A): B lies above A.
struct MergeAllGathers : public OpRewritePattern<AllGatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllGatherOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<AllGatherOp>();
    if (!inner || !inner->hasOneUse() || inner.getMesh() != op.getMesh())
      return failure();
    DimAxes merged = op.getAxesPerDim();
    for (auto [outer, first] : llvm::zip_equal(merged, inner.getAxesPerDim()))
      outer.append(first.begin(), first.end());
    rewriter.replaceOpWithNewOp<AllGatherOp>(
        op, op.getType(), inner.getOperand(), op.getMeshAttr(),
        toAttr(op.getContext(), merged));
    return success();
  }
};

/// all_slice(all_slice(x, A), B) = all_slice(x, A ++ B).
struct MergeAllSlices : public OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<AllSliceOp>();
    if (!inner || inner.getMesh() != op.getMesh())
      return failure();
    DimAxes merged = inner.getAxesPerDim();
    for (auto [first, outer] : llvm::zip_equal(merged, op.getAxesPerDim()))
      first.append(outer.begin(), outer.end());
    rewriter.replaceOpWithNewOp<AllSliceOp>(
        op, op.getType(), inner.getOperand(), op.getMeshAttr(),
        toAttr(op.getContext(), merged));
    return success();
  }
};

/// all_reduce(all_reduce(x, A), B) = all_reduce(x, A ∪ B) for disjoint A, B
/// (over a common axis the second sum would count the first n times).
struct MergeAllReduces : public OpRewritePattern<AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllReduceOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<AllReduceOp>();
    if (!inner || !inner->hasOneUse() || inner.getMesh() != op.getMesh())
      return failure();
    AxisNames merged = toNames(inner.getReductionAxes());
    for (StringRef axis : toNames(op.getReductionAxes())) {
      if (llvm::is_contained(merged, axis))
        return failure();
      merged.push_back(axis);
    }
    rewriter.replaceOpWithNewOp<AllReduceOp>(
        op, op.getType(), inner.getOperand(), op.getMeshAttr(),
        toAttr(op.getContext(), merged));
    return success();
  }
};

/// add(all_reduce(x, A), all_reduce(y, A)) = all_reduce(add(x, y), A): the
/// sum is linear, so two partial sums reduce as one (a step that
/// accumulates microbatches reduces their gradients once, not once each).
/// Only when both all-reduces feed nothing else, so no data is summed twice.
struct SumBeforeAllReduce : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    auto lhs = op.getLhs().getDefiningOp<AllReduceOp>();
    auto rhs = op.getRhs().getDefiningOp<AllReduceOp>();
    if (!lhs || !rhs || lhs == rhs || !lhs->hasOneUse() || !rhs->hasOneUse() ||
        lhs.getMesh() != rhs.getMesh() ||
        lhs.getOperand().getType() != rhs.getOperand().getType() ||
        lhs.getType() != op.getType())
      return failure();
    AxisNames left = toNames(lhs.getReductionAxes());
    AxisNames right = toNames(rhs.getReductionAxes());
    llvm::sort(left);
    llvm::sort(right);
    if (left != right)
      return failure();
    auto sum = AddOp::create(rewriter, op.getLoc(), lhs.getOperand(),
                             rhs.getOperand());
    sum->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOpWithNewOp<AllReduceOp>(
        op, op.getType(), sum, lhs.getMeshAttr(), lhs.getReductionAxes());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Gathers and slices that cancel
//===----------------------------------------------------------------------===//

/// all_slice(all_gather(x, A), B) with each B[d] a prefix of A[d]: the axes
/// after the prefix stay gathered, all_gather(x, A - B); x when A = B.
struct SliceOfGather : public OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp op,
                                PatternRewriter &rewriter) const override {
    auto gather = op.getOperand().getDefiningOp<AllGatherOp>();
    if (!gather || gather.getMesh() != op.getMesh())
      return failure();
    DimAxes rest;
    for (auto [gathered, sliced] :
         llvm::zip_equal(gather.getAxesPerDim(), op.getAxesPerDim())) {
      if (sliced.size() > gathered.size() ||
          ArrayRef<StringRef>(gathered).take_front(sliced.size()) !=
              ArrayRef<StringRef>(sliced))
        return failure();
      rest.emplace_back(gathered.begin() + sliced.size(), gathered.end());
    }
    if (isEmpty(rest)) {
      rewriter.replaceOp(op, gather.getOperand());
      return success();
    }
    // A smaller gather beside one that stays for other users would add
    // communication.
    if (!gather->hasOneUse())
      return failure();
    rewriter.replaceOpWithNewOp<AllGatherOp>(
        op, op.getType(), gather.getOperand(), op.getMeshAttr(),
        toAttr(op.getContext(), rest));
    return success();
  }
};

/// all_gather(all_slice(x, B), A) with each A[d] a suffix of B[d]: only the
/// slice's first axes remain, all_slice(x, B - A); x when A = B.
struct GatherOfSlice : public OpRewritePattern<AllGatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllGatherOp op,
                                PatternRewriter &rewriter) const override {
    auto slice = op.getOperand().getDefiningOp<AllSliceOp>();
    if (!slice || slice.getMesh() != op.getMesh())
      return failure();
    DimAxes rest;
    for (auto [sliced, gathered] :
         llvm::zip_equal(slice.getAxesPerDim(), op.getAxesPerDim())) {
      if (gathered.size() > sliced.size() ||
          ArrayRef<StringRef>(sliced).take_back(gathered.size()) !=
              ArrayRef<StringRef>(gathered))
        return failure();
      rest.emplace_back(sliced.begin(), sliced.end() - gathered.size());
    }
    if (isEmpty(rest))
      rewriter.replaceOp(op, slice.getOperand());
    else
      rewriter.replaceOpWithNewOp<AllSliceOp>(
          op, op.getType(), slice.getOperand(), op.getMeshAttr(),
          toAttr(op.getContext(), rest));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// all_reduce + all_slice
//===----------------------------------------------------------------------===//

/// all_slice(all_reduce(x, R), S). Per dimension, the leading sliced axes
/// that are in R form S1 and the rest S2 (which must avoid R):
///   reduce_scatter(all_reduce(x, R - S1), S1), then all_slice S2;
/// and with S1 empty the slice moves first: all_reduce(all_slice(x, S), R).
struct ReduceThenSlice : public OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp op,
                                PatternRewriter &rewriter) const override {
    auto reduce = op.getOperand().getDefiningOp<AllReduceOp>();
    if (!reduce || !reduce->hasOneUse() || reduce.getMesh() != op.getMesh())
      return failure();
    AxisNames reduced = toNames(reduce.getReductionAxes());
    DimAxes scattered, sliced;
    AxisNames allScattered;
    for (const AxisNames &axes : op.getAxesPerDim()) {
      size_t n = 0;
      while (n < axes.size() && llvm::is_contained(reduced, axes[n]))
        ++n;
      scattered.emplace_back(axes.begin(), axes.begin() + n);
      sliced.emplace_back(axes.begin() + n, axes.end());
      allScattered.append(axes.begin(), axes.begin() + n);
      for (StringRef axis : sliced.back())
        if (llvm::is_contained(reduced, axis))
          return failure();
    }
    Location loc = op.getLoc();
    FlatSymbolRefAttr mesh = op.getMeshAttr();
    MLIRContext *ctx = op.getContext();
    Value x = reduce.getOperand();
    if (allScattered.empty()) {
      Value slice = AllSliceOp::create(rewriter, loc, op.getType(), x, mesh,
                                       op.getDimAxes());
      rewriter.replaceOpWithNewOp<AllReduceOp>(op, op.getType(), slice, mesh,
                                               reduce.getReductionAxes());
      return success();
    }
    AxisNames remaining;
    for (StringRef axis : reduced)
      if (!llvm::is_contained(allScattered, axis))
        remaining.push_back(axis);
    if (!remaining.empty())
      x = AllReduceOp::create(rewriter, loc, x.getType(), x, mesh,
                              toAttr(ctx, remaining));
    auto scatterType =
        splitType(op, mesh, cast<RankedTensorType>(x.getType()), scattered);
    Value result = ReduceScatterOp::create(rewriter, loc, scatterType, x, mesh,
                                           toAttr(ctx, scattered));
    if (!isEmpty(sliced))
      result = AllSliceOp::create(rewriter, loc, op.getType(), result, mesh,
                                  toAttr(ctx, sliced));
    rewriter.replaceOp(op, result);
    return success();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct OptimizeCollectivesPass
    : public mlir::sd::impl::OptimizeCollectivesBase<OptimizeCollectivesPass> {
  using OptimizeCollectivesBase::OptimizeCollectivesBase;

  LogicalResult initialize(MLIRContext *context) override {
    RewritePatternSet set(context);
    set.add<
        DropUnitAxesPerDim<AllGatherOp>, DropUnitAxesPerDim<AllSliceOp>,
        DropUnitAxesPerDim<ReduceScatterOp>, DropUnitAxesAllReduce,
        DropUnitAxesNamed<AllToAllOp>, DropUnitAxesNamed<CollectivePermuteOp>,
        DropIdentityPermute, DeduplicateCollective<AllGatherOp>,
        DeduplicateCollective<AllSliceOp>, DeduplicateCollective<AllReduceOp>,
        DeduplicateCollective<ReduceScatterOp>,
        DeduplicateCollective<AllToAllOp>,
        DeduplicateCollective<CollectivePermuteOp>, MergeAllGathers,
        MergeAllSlices, MergeAllReduces, SumBeforeAllReduce, SliceOfGather,
        GatherOfSlice, ReduceThenSlice>(context);
    patterns = FrozenRewritePatternSet(std::move(set));
    return success();
  }

  void runOnOperation() override {
    // Every pattern shrinks the program, so the driver converges; its
    // iteration limit is no error. The driver erases the ops the patterns
    // leave dead; the functions have one block, so simplifying regions
    // (a liveness walk of the whole function per iteration) finds nothing
    // more. No sd op folds but the constant (to itself): folding would
    // only ask every op of the function in turn.
    (void)applyPatternsGreedily(
        getOperation(), patterns,
        GreedyRewriteConfig()
            .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled)
            .enableFolding(false));
  }

  FrozenRewritePatternSet patterns;
};
} // namespace
