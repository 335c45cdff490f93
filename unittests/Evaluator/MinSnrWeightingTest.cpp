//===- MinSnrWeightingTest.cpp - sd-min-snr-weighting's loss values -------===//
//
// The weighted @loss that sd-min-snr-weighting builds, evaluated, against
// diffusers' formula written out here: per sample, the mean squared error
// times min(SNR, γ)/SNR (epsilon) or min(SNR, γ)/(SNR + 1) (v), with
// SNR = cot²(πt/2); then the mean over the batch.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cmath>

using namespace sd::testing;

namespace {

class MinSnrWeightingTest : public EvaluatorTest {
protected:
  /// @loss(pred, target, t) = mse_loss(pred, target) for a model with
  /// `prediction`, weighted by the pass with `gamma`, evaluated.
  mlir::FailureOr<double> weightedLoss(llvm::StringRef prediction, double gamma,
                                       const Tensor &pred, const Tensor &target,
                                       const Tensor &t) {
    std::string source = "func.func @loss(%p: tensor<4x3xf32> {sd.role = "
                         "#sd.input<latents>}, %n: tensor<4x3xf32> {sd.role = "
                         "#sd.input<noise>}, %t: tensor<4xf32> {sd.role = "
                         "#sd.input<timestep>}) -> tensor<f32> attributes "
                         "{sd.prediction_type = #sd.prediction<" +
                         prediction.str() +
                         ">} {\n"
                         "  %l = sd.mse_loss %p, %n : tensor<4x3xf32>\n"
                         "  return %l : tensor<f32>\n"
                         "}\n";
    mlir::OwningOpRef<mlir::ModuleOp> module = parse(source);
    if (!module)
      return mlir::failure();
    mlir::PassManager pm(&context);
    mlir::sd::MinSnrWeightingOptions options;
    options.gamma = gamma;
    pm.addPass(mlir::sd::createMinSnrWeighting(options));
    if (mlir::failed(pm.run(*module)))
      return mlir::failure();
    mlir::FailureOr<std::vector<Tensor>> results =
        mlir::sd::evaluate(lookup(*module, "loss"), {pred, target, t});
    if (mlir::failed(results))
      return mlir::failure();
    return (*results)[0][0];
  }

  /// diffusers' min-SNR loss (train_text_to_image.py's snr_gamma branch).
  static double expected(bool v, double gamma, const Tensor &pred,
                         const Tensor &target, const Tensor &t) {
    double total = 0;
    for (int64_t b = 0; b < 4; ++b) {
      double mse = 0;
      for (int64_t j = 0; j < 3; ++j) {
        double d = pred[b * 3 + j] - target[b * 3 + j];
        mse += d * d / 3;
      }
      double alphaBar = std::pow(std::cos(M_PI / 2 * t[b]), 2);
      double snr = alphaBar / (1 - alphaBar);
      double weight = std::min(snr, gamma) / (v ? snr + 1 : snr);
      total += weight * mse / 4;
    }
    return total;
  }

  Tensor pred{{4, 3}, DType::F32, {0.5, -1, 2, 0, 1, 1, -2, 3, 0.25, 1, 0, -1}};
  Tensor target{{4, 3}, DType::F32, {1, 1, 1, -1, 0, 2, 0, 0, 0, 2, 2, 2}};
  // Low noise (SNR above γ: weight below 1), around SNR = γ, high noise.
  Tensor t{{4}, DType::F32, {0.05, 0.13, 0.5, 0.95}};
};

TEST_F(MinSnrWeightingTest, EpsilonMatchesDiffusers) {
  mlir::FailureOr<double> loss = weightedLoss("epsilon", 5, pred, target, t);
  ASSERT_TRUE(mlir::succeeded(loss)) << diagnostics;
  EXPECT_NEAR(*loss, expected(false, 5, pred, target, t), 1e-6);
  // The weights do something: the plain mean differs.
  EXPECT_GT(std::abs(*loss - expected(false, 1e30, pred, target, t)), 1e-2);
}

TEST_F(MinSnrWeightingTest, VPredictionMatchesDiffusers) {
  mlir::FailureOr<double> loss =
      weightedLoss("v_prediction", 1, pred, target, t);
  ASSERT_TRUE(mlir::succeeded(loss)) << diagnostics;
  EXPECT_NEAR(*loss, expected(true, 1, pred, target, t), 1e-6);
}

/// t = 0 (no noise: SNR infinite) weighs nothing for epsilon; t = 1 (pure
/// noise) weighs 1, with no NaN from the division.
TEST_F(MinSnrWeightingTest, EpsilonAtTheEnds) {
  Tensor ends{{4}, DType::F32, {0, 0, 1, 1}};
  mlir::FailureOr<double> loss = weightedLoss("epsilon", 5, pred, target, ends);
  ASSERT_TRUE(mlir::succeeded(loss)) << diagnostics;
  // Samples 2 and 3, weight 1 each, over a batch of 4.
  double mse2 = (4 + 9 + 0.0625) / 3, mse3 = (1 + 4 + 9) / 3.0;
  EXPECT_NEAR(*loss, (mse2 + mse3) / 4, 1e-5);
}

} // namespace
