//===- AsyncCollectives.cpp - permutes that overlap the work after them ---===//
//
// Splits each collective_permute of a partitioned program into a start at
// its place and a done before its first reader (see the pass description
// in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

namespace mlir::sd {
#define GEN_PASS_DEF_ASYNCCOLLECTIVES
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

/// The first op of `block` that reads `value` (itself or within its
/// regions), or null.
static Operation *firstReaderIn(Block &block, Value value) {
  Operation *first = nullptr;
  for (Operation *user : value.getUsers()) {
    Operation *reader = block.findAncestorOpInBlock(*user);
    if (reader && (!first || reader->isBeforeInBlock(first)))
      first = reader;
  }
  return first;
}

namespace {
struct AsyncCollectivesPass
    : public mlir::sd::impl::AsyncCollectivesBase<AsyncCollectivesPass> {
  using AsyncCollectivesBase::AsyncCollectivesBase;

  void runOnOperation() override {
    SmallVector<CollectivePermuteOp> permutes;
    getOperation().walk(
        [&](CollectivePermuteOp op) { permutes.push_back(op); });
    for (CollectivePermuteOp op : permutes) {
      Block &block = *op->getBlock();
      Operation *reader = firstReaderIn(block, op.getResult());
      if (!reader || reader == op->getNextNode())
        continue;
      OpBuilder builder(op);
      auto start = CollectivePermuteStartOp::create(
          builder, op.getLoc(), op.getType(), op.getOperand(),
          op.getMeshAttr(), op.getAxesAttr(), op.getPairsAttr());
      start->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      builder.setInsertionPoint(reader);
      auto done = CollectivePermuteDoneOp::create(
          builder, op.getLoc(), op.getType(), start.getResult(),
          op.getOperand());
      op.getResult().replaceAllUsesWith(done.getResult());
      op.erase();
    }
  }
};
} // namespace
