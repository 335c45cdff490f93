//===- ShardingRuleBuilder.h - build #sd.sharding_rule ----------*- C++ -*-===//
//
// Ops build their sharding rules (ShardingRuleOpInterface) with this class
// instead of assembling the attribute by hand: factors are added one at a
// time with the dimension each operand and result maps to them, and the
// reshape factorization (compound factors) lives here once.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SHARDINGRULEBUILDER_H
#define SD_IR_SHARDINGRULEBUILDER_H

#include "sd/IR/SDAttrs.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/TypeRange.h"

namespace mlir::sd {

class ShardingRuleBuilder {
public:
  /// Marks an operand or result that does not take part in a factor.
  static constexpr int64_t kNoDim = -1;

  /// A builder for an op with operands and results of these (ranked tensor)
  /// types; every dimension starts without factors.
  ShardingRuleBuilder(MLIRContext *context, TypeRange operandTypes,
                      TypeRange resultTypes);
  /// A builder for `op`'s operand and result types.
  explicit ShardingRuleBuilder(Operation *op);

  /// Adds a factor of `size` and `kind`: operand `i`'s dimension
  /// `operandDims[i]` and result `r`'s dimension `resultDims[r]` get it as
  /// their next (more minor) factor; kNoDim skips a tensor. The lists have
  /// one entry per operand and per result.
  ShardingRuleBuilder &addFactor(ArrayRef<int64_t> operandDims,
                                 ArrayRef<int64_t> resultDims, int64_t size,
                                 FactorKind kind = FactorKind::PassThrough);

  /// Adds one factor per dimension of `shape`, mapped to the same dimension
  /// of every operand and result of rank > 0 (elementwise ops). `kindOf`
  /// gives a dimension's kind (pass-through when absent).
  ShardingRuleBuilder &
  addPointwise(ArrayRef<int64_t> shape,
               function_ref<FactorKind(int64_t dim)> kindOf = nullptr);

  /// Adds the factors of a row-major reshape of operand `operand` (of
  /// `inShape`) into result `result` (of `outShape`). Walking both shapes
  /// from the major end, each common divisor (gcd) of the current input and
  /// output dimensions becomes a factor shared by both, so a split or merged
  /// dimension maps to a compound factor: [6] -> [2, 3] gives [ij] -> [i, j].
  /// Where the shapes cannot be aligned ([2, 3] -> [3, 2]) the dimensions
  /// get factors of their own until the running products meet again. Size-1
  /// dimensions map to no factor. Fails for unequal element counts, dynamic
  /// or zero-size dimensions.
  LogicalResult addReshape(ArrayRef<int64_t> inShape,
                           ArrayRef<int64_t> outShape, int64_t operand = 0,
                           int64_t result = 0);

  /// The rule built so far.
  OpShardingRuleAttr build() const;

  int64_t getNumFactors() const { return factorSizes.size(); }

private:
  /// Factor indices per dimension of one tensor, major to minor.
  using TensorFactors = SmallVector<SmallVector<int64_t, 2>>;

  /// Adds a factor mapped to one operand dimension and/or one result
  /// dimension only (kNoDim: none).
  void addFactorTo(int64_t operand, int64_t operandDim, int64_t result,
                   int64_t resultDim, int64_t size, FactorKind kind);
  int64_t newFactor(int64_t size, FactorKind kind);

  MLIRContext *context;
  SmallVector<int64_t> factorSizes;
  SmallVector<FactorKind> factorKinds;
  SmallVector<TensorFactors> operands;
  SmallVector<TensorFactors> results;
};

} // namespace mlir::sd

#endif // SD_IR_SHARDINGRULEBUILDER_H
