//===- TrainStepTest.cpp - sd-differentiate, executed ---------------------===//
//
// The training step checked by running it with the reference evaluator:
// * the gradient of models/dit_tiny.mlir's whole loss against central
//   finite differences along random directions, in f64;
// * AdamW (warm-up, weight decay, clipping) against the formula written
//   out here;
// * microbatches: accumulating two halves equals one whole batch;
// * the partitioned training step (loss, parameters, optimizer state) on
//   the eight meshes of the partitioning tests, for the remat policies
//   NONE, FULL and OFFLOAD_MATMUL_WITHOUT_BATCH, against one device; and
//   the tiny UNet's (sdgen's unet-tiny: convolutions, group norms, skips,
//   up-sampling, cross-attention) on the same meshes.
//
//===----------------------------------------------------------------------===//

#include "PartitionTestUtils.h"

#include "sd/Analysis/CostModel.h"
#include "sd/ModelGen/ModelGen.h"
#include "sd/Reference/Random.h"

#include <cmath>

using namespace sd::testing;
using namespace sd::testing::partition;

namespace {

class TrainStepTest : public EvaluatorTest {
protected:
  TrainStepTest() {
    mlir::DialectRegistry registry;
    mlir::func::registerInlinerExtension(registry);
    context.appendDialectRegistry(registry);
  }

  /// Specializes to `batch` and runs the training passes with `options`:
  /// to @train_step, or only to @loss_grad without `buildStep`.
  mlir::OwningOpRef<mlir::ModuleOp>
  differentiate(llvm::StringRef source, int64_t batch,
                const mlir::sd::TrainingOptions &options,
                bool buildStep = true) {
    mlir::OwningOpRef<mlir::ModuleOp> module = parse(source);
    if (!module)
      return {};
    mlir::PassManager pm(&context);
    mlir::sd::SpecializeBatchOptions specialize;
    specialize.batch = batch;
    pm.addPass(mlir::sd::createSpecializeBatch(specialize));
    mlir::sd::addTrainingPasses(pm, options, buildStep);
    if (mlir::failed(pm.run(*module)))
      return {};
    return module;
  }

  std::vector<Tensor> run(mlir::func::FuncOp func,
                          const std::vector<Tensor> &args,
                          mlir::sd::Precision precision) {
    mlir::sd::EvalOptions options;
    options.precision = precision;
    auto results = mlir::sd::evaluate(func, args, options);
    EXPECT_TRUE(mlir::succeeded(results)) << diagnostics;
    return mlir::succeeded(results) ? *results : std::vector<Tensor>{};
  }
};

//===----------------------------------------------------------------------===//
// The gradient of the whole loss
//===----------------------------------------------------------------------===//

TEST_F(TrainStepTest, DitTinyGradientMatchesFiniteDifferences) {
  std::string source =
      ditTinySource([&](llvm::StringRef text) { return parse(text); });
  ASSERT_FALSE(source.empty()) << diagnostics;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      differentiate(source, /*batch=*/2, {}, /*buildStep=*/false);
  ASSERT_TRUE(module) << diagnostics;
  mlir::func::FuncOp func = lookup(*module, "loss_grad");
  ASSERT_TRUE(func);
  auto args = mlir::sd::initializeArguments(func, /*seed=*/3);
  ASSERT_TRUE(mlir::succeeded(args)) << diagnostics;

  std::vector<Tensor> results = run(func, *args, mlir::sd::Precision::F64);
  ASSERT_EQ(results.size(), func.getNumResults());
  size_t numParams = results.size() - 1;

  // Three random directions over all parameters at once.
  for (uint64_t direction = 0; direction < 3; ++direction) {
    std::vector<Tensor> plus = *args, minus = *args;
    double predicted = 0;
    const double eps = 1e-5;
    for (size_t p = 0; p < numParams; ++p) {
      const Tensor &g = results[1 + p];
      Tensor u = ::sd::ref::rngNormal(g.shape(), direction * 1000 + p, 0.0, 1.0,
                                      DType::F32);
      for (int64_t i = 0; i < u.numElements(); ++i) {
        predicted += g[i] * u[i];
        plus[p][i] += eps * u[i];
        minus[p][i] -= eps * u[i];
      }
    }
    double lossPlus = run(func, plus, mlir::sd::Precision::F64)[0][0];
    double lossMinus = run(func, minus, mlir::sd::Precision::F64)[0][0];
    double measured = (lossPlus - lossMinus) / (2 * eps);
    EXPECT_NEAR(measured, predicted, 1e-6 * std::abs(predicted))
        << "direction " << direction;
  }
}

//===----------------------------------------------------------------------===//
// AdamW
//===----------------------------------------------------------------------===//

// A linear model: loss = mse(x·w + b, noise), batch-polymorphic.
constexpr llvm::StringLiteral kLinear = R"mlir(
func.func @loss(
    %w: tensor<4x3xf32> {sd.role = #sd.param<"w", normal(0.5)>},
    %b: tensor<3xf32> {sd.role = #sd.param<"b", normal(0.5)>},
    %x: tensor<?x4xf32> {sd.role = #sd.input<latents>},
    %t: tensor<?x3xf32> {sd.role = #sd.input<noise>}) -> tensor<f32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %bb = sd.broadcast_in_dim %b dims = [1] : (tensor<3xf32>) -> tensor<?x3xf32>
  %z = sd.add %y, %bb : tensor<?x3xf32>
  %l = sd.mse_loss %z, %t : tensor<?x3xf32>
  return %l : tensor<f32>
}
)mlir";

struct AdamCase {
  const char *name;
  double learningRate, weightDecay, maxGradNorm;
  int64_t warmupSteps;
  double step;
  ::sd::LrSchedule schedule = ::sd::LrSchedule::Constant;
  int64_t scheduleSteps = 0;
  double maxGradValue = 0;
};

class AdamWTest : public TrainStepTest,
                  public ::testing::WithParamInterface<AdamCase> {};

TEST_P(AdamWTest, UpdateFollowsTheFormula) {
  const AdamCase &c = GetParam();
  mlir::OwningOpRef<mlir::ModuleOp> gradModule =
      differentiate(kLinear, 8, {}, /*buildStep=*/false);
  mlir::sd::TrainingOptions options;
  options.step.learningRate = c.learningRate;
  options.step.weightDecay = c.weightDecay;
  options.step.maxGradNorm = c.maxGradNorm;
  options.step.warmupSteps = c.warmupSteps;
  options.step.lrSchedule = c.schedule;
  options.step.lrScheduleSteps = c.scheduleSteps;
  options.step.maxGradValue = c.maxGradValue;
  mlir::OwningOpRef<mlir::ModuleOp> stepModule =
      differentiate(kLinear, 8, options);
  ASSERT_TRUE(gradModule && stepModule) << diagnostics;
  mlir::func::FuncOp gradFunc = lookup(*gradModule, "loss_grad");
  mlir::func::FuncOp stepFunc = lookup(*stepModule, "train_step");
  ASSERT_TRUE(gradFunc && stepFunc);

  auto gradArgs = mlir::sd::initializeArguments(gradFunc, 11);
  ASSERT_TRUE(mlir::succeeded(gradArgs)) << diagnostics;
  std::vector<Tensor> grads =
      run(gradFunc, *gradArgs, mlir::sd::Precision::F64);
  ASSERT_EQ(grads.size(), 3u);

  // train_step(w, b, mu_w, mu_b, nu_w, nu_b, x, t, step) with non-zero
  // moments, to exercise the whole formula.
  const std::vector<Tensor> &params = {(*gradArgs)[0], (*gradArgs)[1]};
  std::vector<Tensor> mus, nus;
  for (const Tensor &p : params) {
    Tensor mu(p.shape(), DType::F32), nu(p.shape(), DType::F32);
    for (int64_t i = 0; i < p.numElements(); ++i) {
      mu[i] = 0.01 * static_cast<double>(i % 5) - 0.02;
      nu[i] = 1e-4 * static_cast<double>(i % 3 + 1);
    }
    mus.push_back(mu);
    nus.push_back(nu);
  }
  std::vector<Tensor> args = {
      params[0],      params[1],      mus[0],
      mus[1],         nus[0],         nus[1],
      (*gradArgs)[2], (*gradArgs)[3], Tensor::scalar(c.step)};
  std::vector<Tensor> out = run(stepFunc, args, mlir::sd::Precision::F64);
  ASSERT_EQ(out.size(), 7u);
  EXPECT_NEAR(out[0][0], grads[0][0], 1e-12);

  // The step's constants are f32, as the program's element type.
  auto f32 = [](double v) {
    return static_cast<double>(static_cast<float>(v));
  };
  // Clipped by value first, then by the norm of what is left.
  auto clipped = [&](double g) {
    if (c.maxGradValue <= 0)
      return g;
    double v = f32(c.maxGradValue);
    return std::min(std::max(g, -v), v);
  };
  double norm = 0;
  for (int p = 0; p < 2; ++p)
    for (double g : grads[1 + p].values())
      norm += clipped(g) * clipped(g);
  norm = std::sqrt(norm);
  double b1 = f32(0.9), b2 = f32(0.999), eps = f32(1e-8);
  double clip =
      c.maxGradNorm > 0 ? std::min(1.0, f32(c.maxGradNorm) / norm) : 1.0;
  double t = c.step + 1;
  double lr = f32(c.learningRate) *
              (c.warmupSteps > 0
                   ? std::min(1.0, t / f32(static_cast<double>(c.warmupSteps)))
                   : 1.0);
  // The decay after warm-up, from the update's count (the step, from 0).
  if (c.schedule != ::sd::LrSchedule::Constant) {
    double w = static_cast<double>(c.warmupSteps);
    double progress = std::clamp(
        (c.step - w) / (static_cast<double>(c.scheduleSteps) - w), 0.0, 1.0);
    lr *= c.schedule == ::sd::LrSchedule::Linear
              ? 1 - progress
              : 0.5 * (1 + std::cos(f32(M_PI) * progress));
  }
  for (int p = 0; p < 2; ++p) {
    for (int64_t i = 0; i < params[p].numElements(); ++i) {
      double g = clipped(grads[1 + p][i]) * clip;
      double m = b1 * mus[p][i] + f32(1 - 0.9) * g;
      double v = b2 * nus[p][i] + f32(1 - 0.999) * g * g;
      double mHat = m / (1 - std::pow(b1, t));
      double vHat = v / (1 - std::pow(b2, t));
      double want = params[p][i] - lr * (mHat / (std::sqrt(vHat) + eps) +
                                         f32(c.weightDecay) * params[p][i]);
      EXPECT_NEAR(out[1 + p][i], want, 1e-12)
          << "param " << p << "[" << i << "]";
      EXPECT_NEAR(out[3 + p][i], m, 1e-12);
      EXPECT_NEAR(out[5 + p][i], v, 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Options, AdamWTest,
    ::testing::Values(AdamCase{"Defaults", 1e-4, 1e-2, 0.0, 0, 0.0},
                      AdamCase{"WarmUp", 1e-3, 0.0, 0.0, 10, 3.0},
                      AdamCase{"AfterWarmUp", 1e-3, 0.0, 0.0, 10, 42.0},
                      AdamCase{"Clipped", 1e-3, 1e-2, 0.05, 0, 5.0},
                      AdamCase{"LinearDecay", 1e-3, 1e-2, 0.0, 2, 5.0,
                               ::sd::LrSchedule::Linear, 10},
                      AdamCase{"CosineDecay", 1e-3, 0.0, 0.0, 2, 7.0,
                               ::sd::LrSchedule::Cosine, 10},
                      AdamCase{"DecayedToZero", 1e-3, 1e-2, 0.0, 0, 12.0,
                               ::sd::LrSchedule::Linear, 10},
                      AdamCase{"ClippedByValue", 1e-3, 0.0, 0.0, 0, 1.0,
                               ::sd::LrSchedule::Constant, 0, 0.01},
                      AdamCase{"ClippedByValueThenNorm", 1e-3, 0.0, 0.05, 0,
                               1.0, ::sd::LrSchedule::Constant, 0, 0.01}),
    [](const ::testing::TestParamInfo<AdamCase> &info) {
      return std::string(info.param.name);
    });

//===----------------------------------------------------------------------===//
// Microbatches
//===----------------------------------------------------------------------===//

TEST_F(TrainStepTest, TwoMicrobatchesEqualOneBatch) {
  mlir::sd::TrainingOptions whole, halves;
  halves.step.gradAccum = 2;
  mlir::OwningOpRef<mlir::ModuleOp> wholeModule =
      differentiate(kLinear, 8, whole);
  // Specialized to the microbatch: the step takes twice as many samples.
  mlir::OwningOpRef<mlir::ModuleOp> halvesModule =
      differentiate(kLinear, 4, halves);
  ASSERT_TRUE(wholeModule && halvesModule) << diagnostics;
  mlir::func::FuncOp wholeFunc = lookup(*wholeModule, "train_step");
  mlir::func::FuncOp halvesFunc = lookup(*halvesModule, "train_step");
  ASSERT_EQ(wholeFunc.getFunctionType(), halvesFunc.getFunctionType());
  auto args = mlir::sd::initializeArguments(wholeFunc, 5);
  ASSERT_TRUE(mlir::succeeded(args)) << diagnostics;
  std::vector<Tensor> want = run(wholeFunc, *args, mlir::sd::Precision::F64);
  std::vector<Tensor> got = run(halvesFunc, *args, mlir::sd::Precision::F64);
  ASSERT_EQ(want.size(), got.size());
  for (size_t r = 0; r < want.size(); ++r)
    EXPECT_LE(relativeError(got[r], want[r]), 1e-9) << "result #" << r;
}

//===----------------------------------------------------------------------===//
// The partitioned training step
//===----------------------------------------------------------------------===//

class TrainStepDifferentialTest : public PartitionTestBase {};

TEST_P(TrainStepDifferentialTest, DitTiny) {
  for (const char *policy : {"NONE", "FULL", "OFFLOAD_MATMUL_WITHOUT_BATCH"}) {
    SCOPED_TRACE(policy);
    std::string source =
        ditTinySource([&](llvm::StringRef text) { return parse(text); });
    ASSERT_FALSE(source.empty()) << diagnostics;
    mlir::sd::TrainingOptions options;
    options.remat.policy = *::sd::parseRematPolicyKind(policy);
    train = options;
    // In f64, so that AdamW's g/(|g|+eps) does not amplify rounding.
    precision = mlir::sd::Precision::F64;
    check(source, "train_step", /*batch=*/4);
  }
}

/// sdgen's unet-tiny at 4×4 (or `latentSize`²) latents and 4 text tokens (a
/// mesh axis must divide the text length the context rules shard), its
/// zero-initialized parameters randomized, as text.
std::string unetTinySource(mlir::MLIRContext &context, int64_t latentSize = 4) {
  mlir::sd::ModelOverrides overrides;
  overrides.latentSize = latentSize;
  overrides.textLength = 4;
  auto config = mlir::sd::makeModelConfig("unet-tiny", overrides);
  if (!config.ok())
    return {};
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::sd::generateModel(context, *config);
  return randomizedSource(module.get());
}

INSTANTIATE_TEST_SUITE_P(Meshes, TrainStepDifferentialTest,
                         ::testing::Values(SD_TRAIN_STEP_TEST_MESHES),
                         meshTestName);

/// The UNet's step on every mesh; under ASan, where the instrumented
/// evaluator takes about ten times as long, on fsdp × tensor alone.
class UnetTrainStepDifferentialTest : public PartitionTestBase {};

TEST_P(UnetTrainStepDifferentialTest, UnetTiny) {
  std::string source = unetTinySource(context);
  ASSERT_FALSE(source.empty()) << diagnostics;
  train = mlir::sd::TrainingOptions();
  precision = mlir::sd::Precision::F64;
  check(source, "train_step", /*batch=*/4);
}

#ifdef __SANITIZE_ADDRESS__
INSTANTIATE_TEST_SUITE_P(Meshes, UnetTrainStepDifferentialTest,
                         ::testing::Values("fsdp:2,tensor:2"), meshTestName);
#else
INSTANTIATE_TEST_SUITE_P(Meshes, UnetTrainStepDifferentialTest,
                         ::testing::Values(SD_PARTITION_TEST_MESHES),
                         meshTestName);
#endif

/// Rules that put the batch on data, the image's height on context and its
/// width on tensor (test/data/rules/spatial.yml).
::sd::LogicalAxisRules spatialRules() {
  ::sd::LogicalAxisRules spatial;
  spatial.name = "spatial";
  spatial.rules = {{"batch", {"data"}},
                   {"activation_height", {"context"}},
                   {"activation_width", {"tensor"}}};
  return spatial;
}

/// The UNet's step with the image split spatially (GSPMD's spatial
/// partitioning): rules that put the batch on data, the height on context
/// and the width on tensor, so that every convolution exchanges halo rows
/// (and columns) with its neighbours and group norms sum their statistics
/// across devices. 8×8 latents, so that four devices along the height
/// still hold a row each at the 4×4 level. Meshes: the height on 2 and on
/// 4 devices, the batch on data at the same time, height and width both
/// split.
class UnetSpatialTrainStepDifferentialTest : public PartitionTestBase {};

TEST_P(UnetSpatialTrainStepDifferentialTest, UnetTiny) {
  std::string source = unetTinySource(context, /*latentSize=*/8);
  ASSERT_FALSE(source.empty()) << diagnostics;
  rules = spatialRules();
  train = mlir::sd::TrainingOptions();
  precision = mlir::sd::Precision::F64;
  std::map<std::string, int> collectives =
      check(source, "train_step", /*batch=*/4);
  if (HasFailure())
    return;
  // The image really is split: the convolutions exchanged halos.
  EXPECT_GT(collectives["sd.collective_permute"] +
                collectives["sd.collective_permute_start"],
            0);
}

#ifdef __SANITIZE_ADDRESS__
INSTANTIATE_TEST_SUITE_P(Meshes, UnetSpatialTrainStepDifferentialTest,
                         ::testing::Values("data:2,context:2"), meshTestName);
#else
INSTANTIATE_TEST_SUITE_P(Meshes, UnetSpatialTrainStepDifferentialTest,
                         ::testing::Values("context:2", "context:4",
                                           "data:2,context:2",
                                           "context:2,tensor:2"),
                         meshTestName);
#endif

/// Uneven shards: meshes of 3 devices along an axis that divides nothing
/// of DiT-tiny's batch of 4 (blocks of 2, 2 and an empty one), its 256
/// tokens, its 4 heads or its 64 features, so that every padded path runs:
/// the masked contractions and means, the loss, the reshards through whole
/// dimensions, attention's gathered keys; and the UNet at 10×10 latents
/// with its height on 3 devices (blocks of 4 rows, the last with 2), the
/// 5×5 level below whole.
class PaddedTrainStepDifferentialTest : public PartitionTestBase {};

TEST_P(PaddedTrainStepDifferentialTest, DitTiny) {
  std::string source =
      ditTinySource([&](llvm::StringRef text) { return parse(text); });
  ASSERT_FALSE(source.empty()) << diagnostics;
  train = mlir::sd::TrainingOptions();
  precision = mlir::sd::Precision::F64;
  check(source, "train_step", /*batch=*/4);
}

TEST_P(PaddedTrainStepDifferentialTest, UnetTinySpatial) {
  std::string source = unetTinySource(context, /*latentSize=*/10);
  ASSERT_FALSE(source.empty()) << diagnostics;
  rules = spatialRules();
  train = mlir::sd::TrainingOptions();
  precision = mlir::sd::Precision::F64;
  check(source, "train_step", /*batch=*/4);
}

#ifdef __SANITIZE_ADDRESS__
INSTANTIATE_TEST_SUITE_P(Meshes, PaddedTrainStepDifferentialTest,
                         ::testing::Values("fsdp:3"), meshTestName);
#else
INSTANTIATE_TEST_SUITE_P(Meshes, PaddedTrainStepDifferentialTest,
                         ::testing::Values("fsdp:3", "context:3", "tensor:3",
                                           "data:3,context:3"),
                         meshTestName);
#endif

} // namespace

//===----------------------------------------------------------------------===//
// Remat policies in the cost model
//===----------------------------------------------------------------------===//

namespace {

TEST_F(TrainStepTest, RematPoliciesOrderDevicePeak) {
  std::string source = readModel("dit_tiny.mlir");
  std::map<std::string, mlir::sd::CostReport> reports;
  for (const char *policy : {"NONE", "MATMUL_WITHOUT_BATCH", "FULL",
                             "OFFLOAD_MATMUL_WITHOUT_BATCH"}) {
    mlir::sd::TrainingOptions options;
    options.remat.policy = *::sd::parseRematPolicyKind(policy);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        differentiate(source, /*batch=*/8, options);
    ASSERT_TRUE(module) << diagnostics;
    auto report = mlir::sd::computeCostReport(lookup(*module, "train_step"),
                                              mlir::sd::LayoutChoice::Auto);
    ASSERT_TRUE(mlir::succeeded(report)) << diagnostics;
    reports[policy] = *report;
  }
  const auto &none = reports["NONE"], &matmul = reports["MATMUL_WITHOUT_BATCH"],
             &full = reports["FULL"],
             &offload = reports["OFFLOAD_MATMUL_WITHOUT_BATCH"];
  EXPECT_LT(full.totalBytes(), matmul.totalBytes());
  EXPECT_LT(matmul.totalBytes(), none.totalBytes());
  EXPECT_LT(offload.totalBytes(), matmul.totalBytes());
  // Recomputation: none without remat, most when recomputing everything;
  // offloading recomputes no more than keeping the same values.
  EXPECT_EQ(none.recomputeFlops, 0);
  EXPECT_GT(full.recomputeFlops, matmul.recomputeFlops);
  EXPECT_EQ(offload.recomputeFlops, matmul.recomputeFlops);
  EXPECT_GT(offload.peakHostBytes, 0);
  // Every offloaded value comes back once.
  EXPECT_GE(offload.hostTransferBytes, 2 * offload.peakHostBytes);
  EXPECT_EQ(matmul.peakHostBytes, 0);
  // The same step: only the recomputation differs.
  EXPECT_EQ(full.flops - full.recomputeFlops, none.flops);
}

} // namespace
