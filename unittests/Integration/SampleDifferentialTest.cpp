//===- SampleDifferentialTest.cpp - sdsample's step against the evaluator -===//
//
// One sampler step as sdsample takes it — models/dit_digits.mlir's @denoise
// partitioned for data:2, compiled and run by the runtime, the conditional
// and unconditional rows in one call, guidance, then DDIM — against the
// same step written out here on the reference evaluator's @denoise (one
// device, batch specialized to the same 4 rows).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "sd/Driver/Sample.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/Passes/Passes.h"
#include "sd/Reference/Random.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace sd::testing;
using namespace mlir::sd::sampling;

namespace {

class SampleDifferentialTest : public EvaluatorTest {
protected:
  /// The pipeline inlines the block functions, as sdsample's context can.
  SampleDifferentialTest() {
    mlir::DialectRegistry registry;
    mlir::func::registerInlinerExtension(registry);
    context.appendDialectRegistry(registry);
  }

  static std::string cacheDir() {
    return sd::testing::programCacheDirectory("sd-sample-test");
  }
};

TEST_F(SampleDifferentialTest, GuidedDdimStepMatchesTheEvaluator) {
  auto file = llvm::MemoryBuffer::getFile(SD_MODELS_DIR "/dit_digits.mlir");
  ASSERT_TRUE(file) << "models/dit_digits.mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module = parse((*file)->getBuffer());
  ASSERT_TRUE(module) << diagnostics;

  // Every parameter normal(0, 0.05): the zero-initialized adaLN and final
  // layers of a fresh model would make every prediction 0.
  mlir::func::FuncOp denoise = lookup(*module, "denoise");
  ASSERT_TRUE(denoise);
  std::map<std::string, std::vector<float>> weights;
  std::vector<Tensor> args;
  for (unsigned i = 0; i < denoise.getNumArguments(); ++i) {
    auto param = denoise.getArgAttrOfType<mlir::sd::ParamAttr>(
        i, mlir::sd::SDDialect::kRoleAttrName);
    if (!param)
      continue;
    auto type =
        mlir::cast<mlir::RankedTensorType>(denoise.getArgument(i).getType());
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    std::vector<float> &values = weights[param.getName().str()];
    std::vector<double> exact;
    for (int64_t e = 0; e < type.getNumElements(); ++e) {
      values.push_back(
          static_cast<float>(0.05 * ::sd::ref::normalAt(1000 + i, e)));
      exact.push_back(values.back());
    }
    args.emplace_back(shape, DType::F32, std::move(exact));
  }

  // sdsample's step: data:2, batch 4 = two samples, each conditional and
  // unconditional.
  mlir::sd::PipelineOptions pipeline;
  pipeline.mesh = "data:2";
  pipeline.batch = 4;
  mlir::sd::DeviceSettings settings;
  settings.cacheDir = cacheDir();
  settings.threadsPerDevice = 1;
  settings.printCompilation = false;
  auto program = mlir::sd::DenoiseProgram::create(*module, pipeline, settings);
  ASSERT_TRUE(program.ok()) << program.status() << diagnostics;
  ASSERT_EQ((*program)->batch(), 4);
  ASSERT_EQ((*program)->numClasses(), 10);
  ASSERT_EQ(mlir::sd::samplesPerCall(**program, 2.5), 2);
  ASSERT_TRUE((*program)->setWeights(weights).ok());

  const std::vector<int64_t> ids = {5, 9}, classes = {3, 7};
  const int64_t elements = 64;
  const double t = 0.6, next = 0.3, scale = 2.5;
  std::vector<float> x = initialNoise(/*seed=*/4, ids, elements);
  absl::StatusOr<std::vector<float>> pred =
      mlir::sd::guidedDenoiser(**program, {classes, nullptr, scale})(x, t);
  ASSERT_TRUE(pred.ok()) << pred.status();
  std::vector<float> stepped = x;
  SamplerOptions options{Sampler::Ddim, Prediction::Epsilon, /*clipX0=*/true,
                         /*seed=*/4};
  samplerStep(options, 0, t, next, ids, elements, *pred, stepped);

  // The evaluator's: the rows [x0 as 3, x1 as 7, x0 null, x1 null].
  mlir::PassManager pm(&context);
  mlir::sd::SpecializeBatchOptions specialize;
  specialize.batch = 4;
  pm.addPass(mlir::sd::createSpecializeBatch(specialize));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << diagnostics;
  denoise = lookup(*module, "denoise");
  std::vector<double> rows, times(4, static_cast<float>(t)), labels(4 * 11, 0);
  for (int copy = 0; copy < 2; ++copy)
    rows.insert(rows.end(), x.begin(), x.end());
  labels[0 * 11 + 3] = labels[1 * 11 + 7] = 1;
  labels[2 * 11 + 10] = labels[3 * 11 + 10] = 1;
  args.emplace_back(std::vector<int64_t>{4, 8, 8, 1}, DType::F32, rows);
  args.emplace_back(std::vector<int64_t>{4}, DType::F32, times);
  args.emplace_back(std::vector<int64_t>{4, 11}, DType::F32, labels);
  auto results = mlir::sd::evaluate(denoise, args);
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  const Tensor &out = results->front();
  ASSERT_EQ(out.numElements(), 4 * elements);

  double c = std::cos(M_PI / 2 * t), s = std::sin(M_PI / 2 * t);
  double cNext = std::cos(M_PI / 2 * next), sNext = std::sin(M_PI / 2 * next);
  double largest = 0, worstPred = 0, worstStep = 0;
  for (int64_t i = 0; i < 2 * elements; ++i) {
    double cond = out[i], uncond = out[2 * elements + i];
    double eps = uncond + scale * (cond - uncond);
    double x0 = (x[i] - s * eps) / c, noise = eps;
    if (std::abs(x0) > 1) {
      x0 = std::clamp(x0, -1.0, 1.0);
      noise = (x[i] - c * x0) / s;
    }
    double expected = cNext * x0 + sNext * noise;
    largest = std::max(largest, std::abs(eps));
    worstPred = std::max(worstPred, std::abs((*pred)[i] - eps));
    worstStep = std::max(worstStep, std::abs(stepped[i] - expected));
  }
  // The network does something (its predictions are not all 0), and the
  // compiled, partitioned step agrees with the evaluator's to f32 rounding.
  EXPECT_GT(largest, 0.1);
  EXPECT_LT(worstPred, 1e-5 * std::max(1.0, largest)) << largest;
  EXPECT_LT(worstStep, 1e-5 * std::max(1.0, largest));
  // The conditional and unconditional rows differ: guidance mattered.
  double spread = 0;
  for (int64_t i = 0; i < 2 * elements; ++i)
    spread = std::max(spread, std::abs(out[i] - out[2 * elements + i]));
  EXPECT_GT(spread, 1e-3);
}

} // namespace
