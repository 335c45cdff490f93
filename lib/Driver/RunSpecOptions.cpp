//===- RunSpecOptions.cpp - A RunSpec as compiler and run options ---------===//

#include "sd/Driver/RunSpecOptions.h"

#include "sd/Runtime/Kernels.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::sd;

absl::StatusOr<PlanningBase>
mlir::sd::planningBase(const ::sd::RunSpecFlags &values) {
  ::sd::RunSpecFlags single = values;
  single.mesh.reset();
  single.devices.reset();
  single.processes.reset();
  // A per-device batch is of the devices planned for, not of the one
  // device the mesh-free step is built for: the global batch is planned
  // (and --plan-output's per_device_batch_size, sdrun --mesh=auto's run,
  // divide it again). With --grad-accum it is a microbatch's, as
  // MaxDiffusion counts: global = per device × devices × microbatches.
  if (values.perDeviceBatch && values.devices && !values.batch) {
    int64_t accum = values.gradAccum.value_or(1);
    double global =
        *values.perDeviceBatch * double(*values.devices) * double(accum);
    if (!(global >= 1.0) || global > double(::sd::kMaxGlobalBatch) ||
        std::fabs(global - std::round(global)) > 1e-9)
      return absl::InvalidArgumentError(absl::StrFormat(
          "--per-device-batch=%g × %d devices%s = %g is not a whole, "
          "positive global batch of at most %d",
          *values.perDeviceBatch, *values.devices,
          accum > 1 ? absl::StrFormat(" × %d microbatches", accum) : "", global,
          ::sd::kMaxGlobalBatch));
    single.batch = std::llround(global);
    single.perDeviceBatch.reset();
  }
  absl::StatusOr<::sd::RunSpec> spec =
      ::sd::resolveRunSpec(single, ::sd::HostInfo::current());
  if (!spec.ok())
    return spec.status();
  PlanningBase base{*spec, pipelineOptions(*spec), {}};
  base.pipeline.train = true;
  base.plan.deviceMemory = spec->run.deviceMemoryBudget;
  if (spec->remat.policy.source != ::sd::SettingSource::Default)
    base.plan.remats = {spec->remat.policy.value};
  if (spec->rules.source != ::sd::SettingSource::Default)
    base.plan.ruleVariants = false;
  if (spec->batch.gradAccum.source != ::sd::SettingSource::Default)
    base.plan.accumulations = {spec->batch.gradAccum.value};
  if (spec->model.attention.source != ::sd::SettingSource::Default &&
      spec->model.attention.value != ::sd::AttentionKind::Auto)
    base.plan.attentions = {spec->model.attention.value};
  return base;
}

PipelineOptions mlir::sd::pipelineOptions(const ::sd::RunSpec &spec) {
  PipelineOptions options;
  const ::sd::MeshSettings &mesh = spec.mesh;
  std::tie(options.mesh, options.dcnMesh, options.devices, options.processes) =
      std::tie(mesh.ici, mesh.dcn, mesh.devices, mesh.processes);
  options.network = mesh.network;
  options.rules = spec.rules.value;
  options.batch = spec.batch.global.value;
  // The devices the rules shard the batch over, so that the program's
  // default batch can be made to fit them.
  absl::StatusOr<std::vector<std::vector<std::string>>> batchAxes =
      spec.rules.value.resolve(spec.mesh.mesh, "latents", {"batch"}, {-1});
  if (batchAxes.ok())
    for (const std::string &axis : batchAxes->front())
      if (const ::sd::MeshAxis *found = spec.mesh.mesh.findAxis(axis))
        options.batchMultiple *= found->size();

  RematOptions &remat = options.training.remat;
  remat.policy = spec.remat.policy.value;
  const std::vector<std::string> &saved = spec.remat.namesSaved.value;
  const std::vector<std::string> &offloaded = spec.remat.namesOffloaded.value;
  remat.namesSaved.assign(saved.begin(), saved.end());
  remat.namesOffloaded.assign(offloaded.begin(), offloaded.end());
  BuildTrainStepOptions &step = options.training.step;
  const ::sd::OptimizerSettings &opt = spec.optimizer;
  step.learningRate = opt.learningRate.value;
  step.warmupSteps = opt.warmupSteps.value;
  step.beta1 = opt.adamB1.value;
  step.beta2 = opt.adamB2.value;
  step.epsilon = opt.adamEps.value;
  step.weightDecay = opt.weightDecay.value;
  step.maxGradNorm = opt.maxGradNorm.value;
  step.maxGradValue = opt.maxGradValue.value;
  step.lrSchedule = opt.lrSchedule.value;
  step.lrScheduleSteps = opt.lrScheduleSteps.value;
  step.gradAccum = spec.batch.gradAccum.value;
  step.emaDecay = opt.emaDecay.value;
  step.emaWarmup = opt.emaWarmup.value;
  step.emaInvGamma = opt.emaInvGamma.value;
  step.emaPower = opt.emaPower.value;
  const ::sd::FineTuneSettings &tune = spec.fineTune;
  const std::vector<std::string> &noDecay = tune.weightDecayExclude.value;
  step.noDecay.assign(noDecay.begin(), noDecay.end());
  if (tune.lora.value) {
    AddLoraOptions &lora = options.lora.emplace();
    lora.rank = tune.loraRank.value;
    lora.alpha = tune.loraAlpha.value;
    lora.targets.assign(tune.loraTargets.value.begin(),
                        tune.loraTargets.value.end());
    lora.targetRegex = tune.loraTargetRegex;
  }
  options.freeze.freeze.assign(tune.freeze.value.begin(),
                               tune.freeze.value.end());
  options.freeze.trainable.assign(tune.trainable.value.begin(),
                                  tune.trainable.value.end());
  if (spec.data.snrGamma.value > 0)
    options.snrGamma = spec.data.snrGamma.value;

  options.weightsDtype = spec.model.weightsDtype.value;
  options.activationsDtype = spec.model.activationsDtype.value;
  options.gradReduceDtype = spec.model.gradReduceDtype.value;
  // A bucket of a fraction of a byte is one of a byte, not none.
  double bucketMb = spec.model.bucketCapMb.value;
  options.bucketBytes =
      bucketMb > 0 ? std::max<int64_t>(1, std::llround(bucketMb * 1048576.0))
                   : 0;
  if (spec.model.attention.value != ::sd::AttentionKind::DotProduct) {
    TileAttentionOptions &tile = options.tileAttention.emplace();
    tile.attention = spec.model.attention.value;
    if (spec.model.ulyssesShards)
      tile.ulyssesShards = spec.model.ulyssesShards->value;
    tile.minSeqLength = spec.model.flashMinSeqLength.value;
    if (spec.model.flashBlockSizes) {
      const ::sd::FlashBlockSizes &given = spec.model.flashBlockSizes->value;
      tile.blockQ = given.blockQ;
      tile.blockKvCompute = given.blockKvCompute;
      tile.blockKv = given.blockKv;
      tile.blockQDkv = given.blockQDkv;
      tile.blockKvDkv = given.blockKvDkv;
      tile.blockKvDkvCompute = given.blockKvDkvCompute;
      tile.blockQDq = given.blockQDq;
      tile.blockKvDq = given.blockKvDq;
      tile.useFusedBwdKernel = given.useFusedBwdKernel;
    }
  }
  return options;
}

DeviceSettings mlir::sd::deviceSettings(const ::sd::RunSpec &spec) {
  DeviceSettings device;
  device.threadsPerDevice = spec.run.threadsPerDevice;
  device.deviceMemoryBudget = spec.run.deviceMemoryBudget;
  device.hostMemoryBudget = spec.run.hostMemoryBudget;
  device.processMemoryLimit = spec.run.processMemoryLimit;
  device.cacheDir = spec.run.cacheDir;
  return device;
}

TrainRunOptions mlir::sd::trainRunOptions(const ::sd::RunSpec &spec) {
  const ::sd::RunSettings &settings = spec.run;
  TrainRunOptions run;
  run.modelPath = settings.modelPath;
  run.pipeline = pipelineOptions(spec);
  run.pipeline.train = true;
  // The optimizer's values are inputs of the step, so that runs differing
  // only in them share the compiled program.
  run.pipeline.training.step.hyperparameterInputs = true;
  run.mesh = spec.mesh.mesh;
  run.steps = settings.steps.value;
  run.seed = settings.seed.value;
  run.verify = settings.verify;
  run.allowNonfiniteLoss = settings.allowNonfiniteLoss;
  run.device = deviceSettings(spec);
  run.metricsPath = settings.metricsPath;
  run.runDir = settings.runDir;
  run.runName = settings.effectiveRunName;
  run.checkpointDir = settings.checkpointDir;
  // -1 and 0 both checkpoint only at the end.
  run.checkpointEvery = std::max<int64_t>(settings.checkpointEvery.value, 0);
  run.resume = settings.resume;
  run.initFrom = settings.initFrom;
  run.pretrained = settings.pretrained.value;
  run.pretrainedOrigin = settings.pretrained.origin;
  run.allowMissing = settings.allowMissing;
  run.exportPath = settings.exportPath;
  run.exportEmaPath = settings.exportEmaPath;
  run.exportMergedPath = settings.exportMergedPath;
  if (spec.fineTune.lora.value)
    run.loraScale =
        spec.fineTune.loraAlpha.value / double(spec.fineTune.loraRank.value);
  run.exportBF16 = settings.exportDtype.value_or(
                       spec.model.weightsDtype.value) == ::sd::DType::BFloat16;
  // resolveRunSpec accepts these two.
  run.datasetType =
      spec.data.type.value == "sd" ? DatasetType::Sd : DatasetType::Synthetic;
  run.trainDataDir = spec.data.trainDataDir.value;
  run.classDropoutProb = spec.data.classDropoutProb.value;
  // resolveRunSpec accepts only these names.
  run.timestepSampling =
      ::sd::data::parseTimestepSampling(spec.data.timestepSampling.value)
          .value_or(::sd::data::TimestepSampling::Uniform);
  run.logitMean = spec.data.logitMean.value;
  run.logitStd = spec.data.logitStd.value;
  const ::sd::DataSettings &data = spec.data;
  // The resolver has checked the strategy's name.
  run.timestepBias =
      ::sd::data::TimestepBias::fromStrategy(
          data.timestepBiasStrategy.value, data.timestepBiasMultiplier.value,
          data.timestepBiasPortion.value, data.timestepBiasBegin.value,
          data.timestepBiasEnd.value)
          .value_or(::sd::data::TimestepBias());
  run.flowShift = spec.sampling.flowShift.value;
  if (spec.data.predictionType)
    run.predictionType = spec.data.predictionType->value;
  if (spec.data.resolution) {
    run.resolution = spec.data.resolution->value;
    run.resolutionOrigin = spec.data.resolution->origin;
  }
  if (spec.data.normNumGroups) {
    run.normNumGroups = spec.data.normNumGroups->value;
    run.normNumGroupsOrigin = spec.data.normNumGroups->origin;
  }
  // -1 and 0 both mean never.
  run.evalEvery = std::max<int64_t>(spec.data.evalEvery.value, 0);
  run.tracePath = settings.tracePath.value;
  run.traceSkipSteps = settings.traceSkipSteps.value;
  run.traceSteps = settings.traceSteps.value;
  run.notes = spec.notes;
  return run;
}

std::string mlir::sd::describePrecision(const PipelineOptions &options,
                                        bool training) {
  if (options.weightsDtype == ::sd::DType::Float32 &&
      options.activationsDtype == ::sd::DType::Float32)
    return "";
  std::string line =
      "precision: weights " +
      std::string(::sd::dtypeName(options.weightsDtype)) + ", activations " +
      std::string(::sd::dtypeName(options.activationsDtype)) +
      (training ? " (f32 master weights and moments)" : " (from f32 weights)");
  if (options.activationsDtype != ::sd::DType::BFloat16)
    return line;
  if (training)
    line += ", gradients reduced in " +
            std::string(::sd::dtypeName(options.gradReduceDtype));
  ::sd::rt::kernels::BF16ProductPath path =
      ::sd::rt::kernels::bf16ProductPath();
  line += path.native ? "; bf16 products on this CPU's bf16 units (oneDNN " +
                            std::string(path.isa) + ")"
                      : "; bf16 products widened to f32 first: this CPU has "
                        "no AVX512_BF16 or AMX (oneDNN " +
                            std::string(path.isa) + ")";
  return line;
}
