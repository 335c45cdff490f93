//===- Autodiff.h - the gradient function's structure -----------*- C++ -*-===//
//
// sd-differentiate hands the gradient function to sd-remat and
// sd-build-train-step with its structure recorded on discardable
// attributes (SDDialect::kBackwardAttrName, kVjpGroupAttrName,
// kLayerAttrName, kLayersAttrName; see the passes' descriptions in
// Passes.td). The helpers the three passes share to read and build it.
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_AUTODIFF_H
#define SD_PASSES_AUTODIFF_H

#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace mlir::sd::autodiff {

/// The function sd-differentiate builds from @loss.
constexpr llvm::StringLiteral kGradientFunctionName = "loss_grad";

/// Whether argument `i` of `func` is a parameter the gradient is taken
/// for: an #sd.param that is not `sd.frozen`.
inline bool isTrainedParameter(FunctionOpInterface func, unsigned i) {
  return func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName) &&
         !func.getArgAttr(i, SDDialect::kFrozenAttrName);
}

/// Whether argument `i` of `func` is a frozen parameter.
inline bool isFrozenParameter(FunctionOpInterface func, unsigned i) {
  return func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName) &&
         func.getArgAttr(i, SDDialect::kFrozenAttrName);
}

/// Whether `op` belongs to the backward program.
inline bool isBackward(Operation *op) {
  return op->hasAttr(SDDialect::kBackwardAttrName);
}

/// The VJP group `op` belongs to, if any.
inline std::optional<int64_t> getVjpGroup(Operation *op) {
  if (auto group = op->getAttrOfType<IntegerAttr>(SDDialect::kVjpGroupAttrName))
    return group.getInt();
  return std::nullopt;
}

/// The value of an `sd.constant` of tensor type `type` with every element
/// `value` (the seed, zero gradients, AdamW's coefficients).
inline ElementsAttr splatAttr(Builder &builder, double value, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  return cast<ElementsAttr>(DenseElementsAttr::get(
      tensorType,
      builder.getFloatAttr(tensorType.getElementType(), value).getValue()));
}

/// Erases the pure ops of `block` whose results nothing uses (what no
/// result needs: cotangents of inputs, unused VJP parts), last first.
inline void eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (op.use_empty() && isPure(&op) && !op.hasTrait<OpTrait::IsTerminator>())
      op.erase();
}

} // namespace mlir::sd::autodiff

#endif // SD_PASSES_AUTODIFF_H
