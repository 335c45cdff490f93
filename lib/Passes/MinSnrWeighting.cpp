//===- MinSnrWeighting.cpp - min-SNR-γ weights on @loss -------------------===//
//
// Rewrites the mean squared error @loss returns into a per-sample weighted
// mean whose weights come from the timestep input (see the pass
// description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <cstdio>

namespace mlir::sd {
#define GEN_PASS_DEF_MINSNRWEIGHTING
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {

/// Builds the weighted loss in place of an sd.mse_loss.
class WeightBuilder {
public:
  WeightBuilder(MseLossOp loss)
      : builder(loss), loc(loss.getLoc()), f32(builder.getF32Type()) {}

  Value toF32(Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType().isF32())
      return value;
    return ConvertOp::create(builder, loc, type.clone(f32), value);
  }

  /// `value` as a tensor shaped like `like` (a per-sample vector).
  Value splatLike(double value, Value like) {
    auto scalarType = RankedTensorType::get({}, f32);
    auto attr = DenseElementsAttr::get(
        scalarType, builder.getFloatAttr(f32, static_cast<float>(value)));
    Value scalar = ConstantOp::create(builder, loc, cast<ElementsAttr>(attr));
    return BroadcastInDimOp::create(builder, loc, like.getType(), scalar,
                                    ArrayRef<int64_t>{});
  }

  /// The sample's min-SNR-γ weight from its timestep t (f32, [B]) under
  /// ᾱ = cos²(πt/2): SNR = cos²/sin².
  Value weights(Value t, PredictionType prediction, double gamma) {
    Value angle = MulOp::create(builder, loc, t, splatLike(M_PI / 2, t));
    Value sin = SinOp::create(builder, loc, angle);
    Value cos = CosOp::create(builder, loc, angle);
    Value sin2 = MulOp::create(builder, loc, sin, sin);
    Value cos2 = MulOp::create(builder, loc, cos, cos);
    // γ/(SNR + 1) = γ·sin².
    Value gammaSin2 = MulOp::create(builder, loc, splatLike(gamma, t), sin2);
    if (prediction == PredictionType::v_prediction)
      // min(SNR, γ)/(SNR + 1) = min(cos², γ·sin²).
      return MinOp::create(builder, loc, cos2, gammaSin2);
    // min(SNR, γ)/SNR = min(1, γ·sin²/cos²).
    Value ratio = DivOp::create(builder, loc, gammaSin2, cos2);
    return MinOp::create(builder, loc, splatLike(1.0, t), ratio);
  }

  /// mean_b(w_b · mean((pred_b − target_b)²)), in f32.
  Value weightedLoss(MseLossOp loss, Value w) {
    Value diff = SubOp::create(builder, loc, toF32(loss.getPredictions()),
                               toF32(loss.getTargets()));
    Value squares = MulOp::create(builder, loc, diff, diff);
    int64_t rank = cast<RankedTensorType>(squares.getType()).getRank();
    Value perSample = squares;
    if (rank > 1)
      perSample = ReduceMeanOp::create(
          builder, loc, squares, llvm::to_vector(llvm::seq<int64_t>(1, rank)));
    Value weighted = MulOp::create(builder, loc, perSample, w);
    return ReduceMeanOp::create(builder, loc, weighted, ArrayRef<int64_t>{0});
  }

private:
  OpBuilder builder;
  Location loc;
  Type f32;
};

class MinSnrWeightingPass
    : public mlir::sd::impl::MinSnrWeightingBase<MinSnrWeightingPass> {
public:
  using MinSnrWeightingBase::MinSnrWeightingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(gamma > 0)) {
      emitError(module.getLoc())
          << "sd-min-snr-weighting: gamma must be positive, not " << gamma;
      return signalPassFailure();
    }
    auto func = module.lookupSymbol<func::FuncOp>("loss");
    if (!func || func.isExternal()) {
      emitError(module.getLoc())
          << "sd-min-snr-weighting weights @loss, and the module has none";
      return signalPassFailure();
    }
    if (failed(weight(func)))
      return signalPassFailure();
  }

private:
  LogicalResult weight(func::FuncOp func) {
    auto prediction = func->getAttrOfType<PredictionTypeAttr>(
        SDDialect::kPredictionTypeAttrName);
    if (!prediction)
      return func.emitError("@loss has no ")
             << SDDialect::kPredictionTypeAttrName
             << ": min-SNR weighting needs the model's noise schedule";
    if (prediction.getValue() == PredictionType::flow)
      return func.emitError("min-SNR weighting (snr_gamma) is for epsilon "
                            "and v_prediction models; @loss predicts flow, "
                            "whose loss is weighted by its timestep "
                            "sampling (timestep_sampling)");
    // The timestep input: one per sample.
    Value timestep;
    for (BlockArgument arg : func.getArguments()) {
      auto input = func.getArgAttrOfType<InputAttr>(arg.getArgNumber(),
                                                    SDDialect::kRoleAttrName);
      if (!input || input.getKind() != InputKind::timestep)
        continue;
      if (timestep)
        return func.emitError("@loss has more than one timestep input (#")
               << cast<BlockArgument>(timestep).getArgNumber() << " and #"
               << arg.getArgNumber() << "): min-SNR weighting needs one";
      timestep = arg;
    }
    if (!timestep)
      return func.emitError("@loss has no #sd.input<timestep> argument: "
                            "min-SNR weighting needs each sample's t");
    auto tType = cast<RankedTensorType>(timestep.getType());
    if (tType.getRank() != 1)
      return func.emitError("@loss's timestep input #")
             << cast<BlockArgument>(timestep).getArgNumber() << " is " << tType
             << ", not one value per sample";

    Operation *terminator = func.getBody().front().getTerminator();
    MseLossOp loss = terminator->getNumOperands() == 1
                         ? terminator->getOperand(0).getDefiningOp<MseLossOp>()
                         : MseLossOp();
    if (!loss)
      return func.emitError("@loss does not return an sd.mse_loss: "
                            "min-SNR weighting weights its per-sample terms");
    auto predType = cast<RankedTensorType>(loss.getPredictions().getType());
    if (predType.getRank() < 1 || predType.getDimSize(0) != tType.getDimSize(0))
      return loss.emitOpError("compares ")
             << predType << ", whose leading dimension is not the batch of "
             << "the timestep input " << tType
             << ": min-SNR weighting needs batch-major values";

    WeightBuilder builder(loss);
    Value w =
        builder.weights(builder.toF32(timestep), prediction.getValue(), gamma);
    Value weighted = builder.weightedLoss(loss, w);
    loss.getResult().replaceAllUsesWith(weighted);
    loss.erase();
    bool v = prediction.getValue() == PredictionType::v_prediction;
    char shown[32];
    std::snprintf(shown, sizeof(shown), "%g", static_cast<double>(gamma));
    emitRemark(func.getLoc())
        << "min-SNR loss weighting: each sample's mean squared error times "
        << (v ? "min(SNR, γ)/(SNR + 1) (v_prediction)"
              : "min(SNR, γ)/SNR (epsilon)")
        << ", γ = " << shown;
    return success();
  }
};

} // namespace
