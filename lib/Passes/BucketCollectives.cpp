//===- BucketCollectives.cpp - reductions grouped to run back to back -----===//
//
// Moves the all-reduces and reduce-scatters of a partitioned program into
// buckets of consecutive collectives, and the ops that read a bucket's
// results after it (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModels.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::sd {
#define GEN_PASS_DEF_BUCKETCOLLECTIVES
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

/// What a bucket's reductions share: the op, its mesh and its axes (the
/// reduce-scatter's per dimension).
using BucketKey = std::tuple<OperationName, Attribute, Attribute>;

static std::optional<BucketKey> bucketKey(Operation *op) {
  if (auto reduce = dyn_cast<AllReduceOp>(op))
    return std::tuple{op->getName(), Attribute(reduce.getMeshAttr()),
                      Attribute(reduce.getReductionAxesAttr())};
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    return std::tuple{op->getName(), Attribute(scatter.getMeshAttr()),
                      Attribute(scatter.getDimAxesAttr())};
  return std::nullopt;
}

namespace {
/// The open bucket of one block.
class Bucket {
public:
  Bucket(Block &block, int64_t capacity) : block(block), capacity(capacity) {}

  /// Buckets of more than one reduction, and ops moved, so far.
  int64_t buckets = 0, movedOps = 0;

  /// Takes `op` into the bucket, or defers it when it reads the bucket's
  /// results; closes the bucket first where it cannot stay open across
  /// `op`.
  void visit(Operation *op) {
    if (op->hasTrait<OpTrait::IsTerminator>() || op->getNumRegions() != 0 ||
        !isPure(op)) {
      close(op);
      return;
    }
    bool reads = readsBucket(op);
    std::optional<BucketKey> key = bucketKey(op);
    if (key && !collectives.empty() && (reads || *key != *openKey)) {
      // A reduction of another group keeps its place unless it reads the
      // bucket; one of this group that reads it starts the next bucket.
      if (*key == *openKey) {
        close(op);
        reads = false;
      } else if (!reads) {
        return;
      }
    }
    if (reads) {
      waiting.push_back(op);
      moved.insert(op);
      return;
    }
    if (!key)
      return;
    if (collectives.empty())
      openKey = key;
    collectives.push_back(op);
    moved.insert(op);
    bytes += getTensorBytes(op->getOperand(0).getType());
    if (bytes >= capacity)
      close(op->getNextNode());
  }

  /// Moves the bucket's reductions, then the ops waiting for them, before
  /// `before` (null: to the block's end), each in its original order, and
  /// empties the bucket.
  void close(Operation *before) {
    if (collectives.size() > 1)
      ++buckets;
    movedOps += collectives.size() + waiting.size();
    for (ArrayRef<Operation *> ops : {ArrayRef(collectives), ArrayRef(waiting)})
      for (Operation *op : ops) {
        if (before)
          op->moveBefore(before);
        else
          op->moveBefore(&block, block.end());
      }
    collectives.clear();
    waiting.clear();
    moved.clear();
    bytes = 0;
    openKey.reset();
  }

private:
  /// Whether `op` reads a result of the bucket's reductions or of an op
  /// waiting for them.
  bool readsBucket(Operation *op) const {
    return llvm::any_of(op->getOperands(), [&](Value operand) {
      Operation *def = operand.getDefiningOp();
      return def && moved.contains(def);
    });
  }

  Block &block;
  int64_t capacity;
  SmallVector<Operation *> collectives, waiting;
  llvm::SmallPtrSet<Operation *, 32> moved;
  int64_t bytes = 0;
  std::optional<BucketKey> openKey;
};

struct BucketCollectivesPass
    : public mlir::sd::impl::BucketCollectivesBase<BucketCollectivesPass> {
  using BucketCollectivesBase::BucketCollectivesBase;

  LogicalResult initialize(MLIRContext *context) override {
    if (bucketBytes < 0)
      return emitError(UnknownLoc::get(context))
             << "sd-bucket-collectives: bucket-bytes must be at least 0, not "
             << static_cast<int64_t>(bucketBytes);
    return success();
  }

  void runOnOperation() override {
    if (bucketBytes == 0)
      return;
    for (Block &block : getOperation().getBody()) {
      Bucket bucket(block, bucketBytes);
      // The ops in their original order: closing a bucket moves ops that
      // were already visited, never one that is still to come.
      SmallVector<Operation *> ops;
      for (Operation &op : block)
        ops.push_back(&op);
      for (Operation *op : ops)
        bucket.visit(op);
      bucket.close(nullptr);
      numBuckets += bucket.buckets;
      numMoved += bucket.movedOps;
    }
  }
};
} // namespace
