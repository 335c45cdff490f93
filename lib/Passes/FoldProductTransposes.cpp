//===- FoldProductTransposes.cpp - products written in the order used ----===//
//
// A transpose that swaps a dot_general's two groups of free dimensions (the
// lhs's and the rhs's) is the product with its operands swapped:
// (A·B)ᵀ = Bᵀ·Aᵀ costs a GEMM with other transpose flags, not a pass over
// memory. Reverse-mode differentiation writes a weight's gradient as
// dy·x and then transposes it into the weight's layout (JAX's transpose
// rule); after partitioning, the all-reduce that sums it over the data axes
// sits between the product and the transpose, and commutes with it.
// Running after sd-partition keeps the propagation and the collectives
// exactly what they were.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::sd {
#define GEN_PASS_DEF_FOLDPRODUCTTRANSPOSES
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

/// The permutation of a product's result [batch, lhs free, rhs free] into
/// [batch, rhs free, lhs free].
static SmallVector<int64_t>
swappedFreeGroups(int64_t numBatch, int64_t numLhsFree, int64_t numRhsFree) {
  SmallVector<int64_t> permutation;
  for (int64_t i = 0; i < numBatch; ++i)
    permutation.push_back(i);
  for (int64_t i = 0; i < numRhsFree; ++i)
    permutation.push_back(numBatch + numLhsFree + i);
  for (int64_t i = 0; i < numLhsFree; ++i)
    permutation.push_back(numBatch + i);
  return permutation;
}

/// Folds `transpose` when it reads, through single-use all-reduces, a
/// single-use dot_general whose free groups it swaps; returns whether it
/// did.
static bool foldTranspose(TransposeOp transpose) {
  SmallVector<AllReduceOp> sums;
  Value v = transpose.getOperand();
  while (auto sum = v.getDefiningOp<AllReduceOp>()) {
    if (!v.hasOneUse())
      return false;
    sums.push_back(sum);
    v = sum.getOperand();
  }
  auto dot = v.getDefiningOp<DotGeneralOp>();
  if (!dot || !v.hasOneUse())
    return false;
  int64_t numBatch = dot.getLhsBatch().size();
  int64_t lhsRank = dot.getLhs().getType().getRank();
  int64_t rhsRank = dot.getRhs().getType().getRank();
  int64_t numLhsFree = lhsRank - numBatch - dot.getLhsContract().size();
  int64_t numRhsFree = rhsRank - numBatch - dot.getRhsContract().size();
  if (numLhsFree == 0 || numRhsFree == 0 ||
      transpose.getPermutation() != ArrayRef<int64_t>(swappedFreeGroups(
                                        numBatch, numLhsFree, numRhsFree)))
    return false;

  OpBuilder b(dot);
  // The transposed shape in the product's element type (an f32 product of
  // bf16 operands stays f32).
  auto swapped =
      DotGeneralOp::create(b, dot.getLoc(), transpose.getType(), dot.getRhs(),
                           dot.getLhs(), dot.getRhsBatch(), dot.getLhsBatch(),
                           dot.getRhsContract(), dot.getLhsContract());
  swapped->setDiscardableAttrs(dot->getDiscardableAttrDictionary());
  Value result = swapped.getResult();
  // The sums, innermost first, now over the transposed value.
  for (AllReduceOp sum : llvm::reverse(sums)) {
    b.setInsertionPoint(sum);
    Operation *clone = b.clone(*sum.getOperation());
    clone->setOperand(0, result);
    clone->getResult(0).setType(result.getType());
    result = clone->getResult(0);
  }
  transpose.getResult().replaceAllUsesWith(result);
  transpose.erase();
  for (AllReduceOp sum : sums)
    sum.erase();
  dot.erase();
  return true;
}

namespace {
struct FoldProductTransposesPass
    : public mlir::sd::impl::FoldProductTransposesBase<
          FoldProductTransposesPass> {
  void runOnOperation() override {
    SmallVector<TransposeOp> transposes;
    getOperation().walk([&](TransposeOp op) { transposes.push_back(op); });
    for (TransposeOp op : transposes)
      numFolded += foldTranspose(op);
  }
};
} // namespace
