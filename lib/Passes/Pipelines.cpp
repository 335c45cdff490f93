//===- Pipelines.cpp - sdopt's default pipeline ---------------------------===//

#include "sd/Passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::sd;

std::vector<float>
mlir::sd::hyperparameterValues(const BuildTrainStepOptions &options) {
  std::vector<float> values(static_cast<size_t>(Hyperparameter::Count));
  auto set = [&](Hyperparameter which, double value) {
    values[static_cast<size_t>(which)] = static_cast<float>(value);
  };
  set(Hyperparameter::LearningRate, options.learningRate);
  set(Hyperparameter::WarmupSteps, static_cast<double>(options.warmupSteps));
  set(Hyperparameter::DecaySteps, static_cast<double>(options.lrScheduleSteps) -
                                      static_cast<double>(options.warmupSteps));
  set(Hyperparameter::Beta1, options.beta1);
  set(Hyperparameter::OneMinusBeta1, 1.0 - options.beta1);
  set(Hyperparameter::Beta2, options.beta2);
  set(Hyperparameter::OneMinusBeta2, 1.0 - options.beta2);
  set(Hyperparameter::Epsilon, options.epsilon);
  set(Hyperparameter::WeightDecay, options.weightDecay);
  set(Hyperparameter::MaxGradNorm, options.maxGradNorm);
  set(Hyperparameter::MaxGradValue, options.maxGradValue);
  set(Hyperparameter::NegMaxGradValue, -options.maxGradValue);
  set(Hyperparameter::EmaDecay, options.emaDecay);
  set(Hyperparameter::EmaInvGamma, options.emaInvGamma);
  set(Hyperparameter::NegEmaPower, -options.emaPower);
  return values;
}

void mlir::sd::addTrainingPasses(OpPassManager &pm,
                                 const TrainingOptions &options,
                                 bool buildStep) {
  pm.addPass(createDifferentiate());
  pm.addNestedPass<func::FuncOp>(createRemat(options.remat));
  if (buildStep)
    pm.addPass(createBuildTrainStep(options.step));
}

void mlir::sd::addGradientReductionPasses(OpPassManager &pm,
                                          const PipelineOptions &options) {
  if (options.train && options.activationsDtype == ::sd::DType::BFloat16 &&
      options.gradReduceDtype == ::sd::DType::Float32)
    pm.addNestedPass<func::FuncOp>(createWidenGradients());
}

void mlir::sd::buildDefaultPipeline(OpPassManager &pm,
                                    const PipelineOptions &options) {
  // What is trained first: the adapters are parameters like the others
  // for every later pass.
  if (options.lora)
    pm.addPass(createAddLora(*options.lora));
  if (options.train &&
      (!options.freeze.freeze.empty() || !options.freeze.trainable.empty()))
    pm.addPass(createFreezeParameters(options.freeze));
  // Mixed precision next: every later pass (and attention=auto's cost
  // comparison) sees the bf16 program.
  if (options.weightsDtype != ::sd::DType::Float32 ||
      options.activationsDtype != ::sd::DType::Float32) {
    ApplyPrecisionOptions precision;
    precision.weightsDtype = options.weightsDtype;
    precision.activationsDtype = options.activationsDtype;
    pm.addPass(createApplyPrecision(precision));
  }
  // The loss's weighting after the precision policy: it computes in f32
  // whatever the network's output type.
  if (options.train && options.snrGamma) {
    MinSnrWeightingOptions weighting;
    weighting.gamma = *options.snrGamma;
    pm.addPass(createMinSnrWeighting(weighting));
  }
  // attention=auto tries the strategies on copies of the module first, and
  // tiles with the cheapest.
  if (options.tileAttention &&
      options.tileAttention->attention == ::sd::AttentionKind::Auto)
    pm.addPass(createSelectAttention(options));
  SpecializeBatchOptions batch;
  // The training step runs the program once per microbatch.
  batch.batch = options.batch;
  batch.batchMultiple = options.batchMultiple;
  if (options.train && options.batch > 0)
    batch.batch = options.batch / options.training.step.gradAccum;
  pm.addPass(createSpecializeBatch(batch));
  // Attention is tiled before differentiation, whose VJP of the tiled op is
  // the tiled backward.
  if (options.tileAttention &&
      options.tileAttention->attention != ::sd::AttentionKind::Auto)
    pm.addNestedPass<func::FuncOp>(createTileAttention(*options.tileAttention));
  // Without a mesh there is nothing to shard: the pipeline only specializes
  // (and differentiates).
  if (options.mesh.empty()) {
    if (options.train)
      addTrainingPasses(pm, options.training);
    return;
  }

  addMeshPasses(pm, options);
  if (options.train)
    addTrainingPasses(pm, options.training);
  if (!options.propagate && !options.partition)
    return;
  buildPartitionPipeline(pm, options);
}

void mlir::sd::addMaterializeMeshPass(OpPassManager &pm,
                                      const PipelineOptions &options) {
  MaterializeMeshOptions mesh;
  mesh.meshSpec = options.mesh;
  mesh.dcnMeshSpec = options.dcnMesh;
  mesh.devices = options.devices;
  mesh.processes = options.processes;
  pm.addPass(createMaterializeMesh(mesh));
}

void mlir::sd::addMeshPasses(OpPassManager &pm,
                             const PipelineOptions &options) {
  addMaterializeMeshPass(pm, options);
  pm.addNestedPass<func::FuncOp>(options.rules
                                     ? createApplyLogicalRules(*options.rules)
                                     : createApplyLogicalRules());
}

void mlir::sd::buildMeshFreePipeline(OpPassManager &pm,
                                     const PipelineOptions &options) {
  PipelineOptions meshFree = options;
  meshFree.mesh.clear();
  meshFree.dcnMesh.clear();
  buildDefaultPipeline(pm, meshFree);
  pm.addPass(createInlinerPass());
  addGradientReductionPasses(pm, options);
}

void mlir::sd::buildMeshPipeline(OpPassManager &pm,
                                 const PipelineOptions &options) {
  addMeshPasses(pm, options);
  PipelineOptions inlined = options;
  inlined.callFree = true;
  buildPartitionPipeline(pm, inlined);
}

void mlir::sd::buildMeshPropagationPipeline(OpPassManager &pm,
                                            const PipelineOptions &options) {
  addMeshPasses(pm, options);
  PipelineOptions propagateOnly = options;
  propagateOnly.callFree = true;
  propagateOnly.partition = false;
  propagateOnly.recordSizeQueries = true;
  buildPartitionPipeline(pm, propagateOnly);
}

void mlir::sd::addPartitionPasses(OpPassManager &pm,
                                  const PipelineOptions &options) {
  pm.addNestedPass<func::FuncOp>(createPartition());
  pm.addNestedPass<func::FuncOp>(createOptimizeCollectives());
  pm.addNestedPass<func::FuncOp>(createFoldProductTransposes());
  if (options.train && options.bucketBytes > 0)
    pm.addNestedPass<func::FuncOp>(
        createBucketCollectives({options.bucketBytes}));
  pm.addNestedPass<func::FuncOp>(createAsyncCollectives());
}

void mlir::sd::buildPartitionPipeline(OpPassManager &pm,
                                      const PipelineOptions &options) {
  // Propagation works on one call-free function.
  if (!options.callFree) {
    pm.addPass(createInlinerPass());
    addGradientReductionPasses(pm, options);
  }
  PropagateShardingOptions propagation;
  propagation.recordProvenance = options.recordProvenance;
  propagation.explain = options.explain;
  propagation.recordSizeQueries = options.recordSizeQueries;
  pm.addNestedPass<func::FuncOp>(createPropagateSharding(propagation));
  if (options.partition)
    addPartitionPasses(pm, options);
}

namespace {
/// The default pipeline's options as a textual pipeline's options.
struct DefaultPipelineOptions
    : public PassPipelineOptions<DefaultPipelineOptions> {
  Option<std::string> mesh{*this, "mesh", llvm::cl::desc("ICI mesh")};
  Option<std::string> dcnMesh{*this, "dcn-mesh", llvm::cl::desc("DCN mesh")};
  Option<int64_t> devices{*this, "devices", llvm::cl::desc("Device count"),
                          llvm::cl::init(0)};
  Option<int64_t> processes{*this, "processes",
                            llvm::cl::desc("Process count"),
                            llvm::cl::init(0)};
  Option<std::string> rules{*this, "rules",
                            llvm::cl::desc("Logical axis rules"),
                            llvm::cl::init("dit")};
  Option<int64_t> batch{*this, "batch", llvm::cl::desc("Global batch"),
                        llvm::cl::init(0)};
  Option<bool> propagate{*this, "propagate",
                         llvm::cl::desc("Inline and propagate shardings"),
                         llvm::cl::init(false)};
  Option<bool> partition{
      *this, "partition",
      llvm::cl::desc("Propagate, then partition into the per-device program "
                     "and optimize its collectives"),
      llvm::cl::init(false)};
};
} // namespace

void mlir::sd::registerSDPipelines() {
  registerSDPasses();
  // Registered without PassPipelineRegistration, whose builder cannot fail:
  // rules that do not load are an error of the pipeline text.
  registerPassPipeline(
      "sd-default-pipeline",
      "Specialize the batch, materialize the mesh and apply logical rules",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        DefaultPipelineOptions o;
        if (failed(o.parseFromString(text)))
          return failure();
        absl::StatusOr<::sd::LogicalAxisRules> rules = ::sd::loadRules(o.rules);
        if (!rules.ok())
          return errorHandler(std::string(rules.status().message()));
        PipelineOptions options;
        options.mesh = o.mesh;
        options.dcnMesh = o.dcnMesh;
        options.devices = o.devices;
        options.processes = o.processes;
        options.rules = *std::move(rules);
        options.batch = o.batch;
        options.propagate = o.propagate;
        options.partition = o.partition;
        buildDefaultPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optionsHandler) {
        optionsHandler(DefaultPipelineOptions());
      });
}
