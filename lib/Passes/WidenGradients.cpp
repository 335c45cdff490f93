//===- WidenGradients.cpp - gradients reduced in f32 ----------------------===//
//
// See the pass description in Passes.td. Each backward bf16-to-f32 convert
// is folded into its producer where the producer can compute an f32 result
// itself; a producer that is itself a sum, a transpose or a reshape of such
// values is widened in turn (a worklist, not recursion: a gradient can be
// the sum of many uses).
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::sd {
#define GEN_PASS_DEF_WIDENGRADIENTS
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

static bool isBF16Tensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isBF16();
}

static Type asF32(Type type) {
  return cast<RankedTensorType>(type).clone(
      Float32Type::get(type.getContext()));
}

namespace {
struct WidenGradientsPass
    : public mlir::sd::impl::WidenGradientsBase<WidenGradientsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<ConvertOp> converts;
    func.walk([&](ConvertOp convert) {
      if (convert->hasAttr(SDDialect::kBackwardAttrName) &&
          !convert->hasAttr(SDDialect::kDerivativeAttrName) &&
          isBF16Tensor(convert.getOperand().getType()) &&
          cast<RankedTensorType>(convert.getType()).getElementType().isF32())
        converts.push_back(convert);
    });
    for (ConvertOp convert : converts)
      widen(convert);
  }

  /// Makes `convert`'s operand an f32 value computed directly, and the
  /// convert's users read it.
  void widen(ConvertOp convert) {
    Value top = convert.getOperand();
    if (!top.hasOneUse() || !producesF32(top.getDefiningOp()))
      return;
    // Values to retype, producers of sums first reached last.
    SmallVector<Value> work{top};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *op = v.getDefiningOp();
      v.setType(asF32(v.getType()));
      ++numWidened;
      if (!isa<AddOp, SubOp, TransposeOp, ReshapeOp>(op))
        continue;
      for (OpOperand &operand : op->getOpOperands()) {
        Value in = operand.get();
        if (in.hasOneUse() && isBF16Tensor(in.getType()) &&
            producesF32(in.getDefiningOp())) {
          work.push_back(in);
          continue;
        }
        // Widened where it is used: exact.
        OpBuilder builder(op);
        auto cast =
            ConvertOp::create(builder, op->getLoc(), asF32(in.getType()), in);
        cast->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
        operand.set(cast);
      }
    }
    convert.getResult().replaceAllUsesWith(top);
    convert.erase();
  }

  /// Whether `op` can give its bf16 result as f32 instead: products (a
  /// convolution's filter gradient among them) and reductions accumulate in
  /// f32 anyway; sums and differences of such values are computed in f32,
  /// and transposes and reshapes move them.
  static bool producesF32(Operation *op) {
    return op && op->hasAttr(SDDialect::kBackwardAttrName) &&
           isa<DotGeneralOp, Conv2DFilterGradOp, ReduceSumOp, ReduceMeanOp,
               AddOp, SubOp, TransposeOp, ReshapeOp>(op);
  }
};
} // namespace
