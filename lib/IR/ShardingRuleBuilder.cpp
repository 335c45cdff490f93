//===- ShardingRuleBuilder.cpp - build #sd.sharding_rule ------------------===//

#include "sd/IR/ShardingRuleBuilder.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;
using namespace mlir::sd;

/// One empty factor list per dimension of each type.
static void
initTensors(TypeRange types,
            SmallVectorImpl<SmallVector<SmallVector<int64_t, 2>>> &tensors) {
  for (Type type : types) {
    auto shaped = cast<ShapedType>(type);
    tensors.emplace_back(shaped.getRank());
  }
}

ShardingRuleBuilder::ShardingRuleBuilder(MLIRContext *context,
                                         TypeRange operandTypes,
                                         TypeRange resultTypes)
    : context(context) {
  initTensors(operandTypes, operands);
  initTensors(resultTypes, results);
}

ShardingRuleBuilder::ShardingRuleBuilder(Operation *op)
    : ShardingRuleBuilder(op->getContext(), op->getOperandTypes(),
                          op->getResultTypes()) {}

int64_t ShardingRuleBuilder::newFactor(int64_t size, FactorKind kind) {
  factorSizes.push_back(size);
  factorKinds.push_back(kind);
  return factorSizes.size() - 1;
}

ShardingRuleBuilder &
ShardingRuleBuilder::addFactor(ArrayRef<int64_t> operandDims,
                               ArrayRef<int64_t> resultDims, int64_t size,
                               FactorKind kind) {
  assert(operandDims.size() == operands.size() &&
         resultDims.size() == results.size() &&
         "one dimension (or kNoDim) per operand and result");
  int64_t factor = newFactor(size, kind);
  for (auto [tensor, dim] : llvm::zip_equal(operands, operandDims))
    if (dim != kNoDim)
      tensor[dim].push_back(factor);
  for (auto [tensor, dim] : llvm::zip_equal(results, resultDims))
    if (dim != kNoDim)
      tensor[dim].push_back(factor);
  return *this;
}

ShardingRuleBuilder &
ShardingRuleBuilder::addPointwise(ArrayRef<int64_t> shape,
                                  function_ref<FactorKind(int64_t)> kindOf) {
  for (auto [dim, size] : llvm::enumerate(shape)) {
    int64_t factor =
        newFactor(size, kindOf ? kindOf(dim) : FactorKind::PassThrough);
    // Scalars (a loss next to tensors) take part in no factor.
    for (TensorFactors &tensor : llvm::concat<TensorFactors>(operands, results))
      if (!tensor.empty())
        tensor[dim].push_back(factor);
  }
  return *this;
}

void ShardingRuleBuilder::addFactorTo(int64_t operand, int64_t operandDim,
                                      int64_t result, int64_t resultDim,
                                      int64_t size, FactorKind kind) {
  int64_t factor = newFactor(size, kind);
  if (operandDim != kNoDim)
    operands[operand][operandDim].push_back(factor);
  if (resultDim != kNoDim)
    results[result][resultDim].push_back(factor);
}

LogicalResult ShardingRuleBuilder::addReshape(ArrayRef<int64_t> inShape,
                                              ArrayRef<int64_t> outShape,
                                              int64_t operand, int64_t result) {
  auto isUsable = [](ArrayRef<int64_t> shape) {
    return llvm::all_of(shape, [](int64_t size) {
      return !ShapedType::isDynamic(size) && size > 0;
    });
  };
  if (!isUsable(inShape) || !isUsable(outShape))
    return failure();
  auto numElements = [](ArrayRef<int64_t> shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                           std::multiplies<int64_t>());
  };
  if (numElements(inShape) != numElements(outShape))
    return failure();

  // A cursor over one side: the current dimension and the part of its size
  // that no factor covers yet. `product` is the product of all factors this
  // side has received; both sides are aligned when their products agree.
  struct Side {
    ArrayRef<int64_t> shape;
    int64_t dim = 0, remaining = 1, product = 1;
    /// Moves past finished (and size-1) dimensions.
    void settle() {
      while (remaining == 1 && dim < static_cast<int64_t>(shape.size())) {
        remaining = shape[dim];
        if (remaining == 1)
          ++dim;
      }
    }
    bool done() const { return dim >= static_cast<int64_t>(shape.size()); }
    /// Records a factor of `size` on the current dimension.
    void take(int64_t size) {
      remaining /= size;
      product *= size;
      if (remaining == 1)
        ++dim;
    }
  };
  Side in{inShape}, out{outShape};
  // `remaining` starts at 1 so that settle() loads dimension 0.
  in.settle();
  out.settle();
  while (!in.done() || !out.done()) {
    if (in.product == out.product) {
      // Aligned: the element counts seen so far agree, so both sides have
      // dimensions left (equal totals) and a common divisor is one factor.
      int64_t common = std::gcd(in.remaining, out.remaining);
      if (common > 1) {
        addFactorTo(operand, in.dim, result, out.dim, common,
                    FactorKind::PassThrough);
        in.take(common);
        out.take(common);
      } else {
        // Coprime: the sides diverge; each gets a factor of its own.
        addFactorTo(operand, in.dim, result, kNoDim, in.remaining,
                    FactorKind::PassThrough);
        addFactorTo(operand, kNoDim, result, out.dim, out.remaining,
                    FactorKind::PassThrough);
        in.take(in.remaining);
        out.take(out.remaining);
      }
    } else {
      // Diverged: the side that is behind catches up, with just the part of
      // its dimension that makes the products meet when that divides it.
      Side &behind = in.product < out.product ? in : out;
      Side &ahead = in.product < out.product ? out : in;
      int64_t size = behind.remaining;
      if (ahead.product % behind.product == 0) {
        int64_t needed = ahead.product / behind.product;
        if (behind.remaining % needed == 0)
          size = needed;
      }
      if (&behind == &in)
        addFactorTo(operand, in.dim, result, kNoDim, size,
                    FactorKind::PassThrough);
      else
        addFactorTo(operand, kNoDim, result, out.dim, size,
                    FactorKind::PassThrough);
      behind.take(size);
    }
    in.settle();
    out.settle();
  }
  return success();
}

/// The attribute form of one tensor's factor lists.
static TensorMappingAttr
buildTensor(MLIRContext *context,
            ArrayRef<SmallVector<int64_t, 2>> dimFactors) {
  SmallVector<DimMappingAttr> dims;
  for (const SmallVector<int64_t, 2> &factors : dimFactors)
    dims.push_back(DimMappingAttr::get(context, factors));
  return TensorMappingAttr::get(context, dims);
}

OpShardingRuleAttr ShardingRuleBuilder::build() const {
  // Tensors with the same factors (all of an elementwise op's) share one
  // attribute, made once: rules are built for every op of a program, in
  // more than one pass.
  SmallVector<std::pair<const TensorFactors *, TensorMappingAttr>, 4> built;
  auto mapping = [&](const TensorFactors &tensor) {
    for (auto [factors, attr] : built)
      if (*factors == tensor)
        return attr;
    TensorMappingAttr attr = buildTensor(context, tensor);
    built.emplace_back(&tensor, attr);
    return attr;
  };
  SmallVector<TensorMappingAttr> operandMappings, resultMappings;
  for (const TensorFactors &tensor : operands)
    operandMappings.push_back(mapping(tensor));
  for (const TensorFactors &tensor : results)
    resultMappings.push_back(mapping(tensor));
  SmallVector<int64_t> reduction, needReplication;
  for (auto [factor, kind] : llvm::enumerate(factorKinds)) {
    if (kind == FactorKind::Reduction)
      reduction.push_back(factor);
    else if (kind == FactorKind::NeedReplication)
      needReplication.push_back(factor);
  }
  return OpShardingRuleAttr::get(context, factorSizes, operandMappings,
                                 resultMappings, reduction, needReplication);
}
