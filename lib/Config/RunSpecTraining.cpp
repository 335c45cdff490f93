//===- RunSpecTraining.cpp - What the steps train and train on -----------===//
//
// resolveRunSpec's steps for the training step's settings: the remat
// policy, AdamW and its schedule, fine-tuning (LoRA, freezing, the
// weight-decay mask), and what each step trains on (data set, timestep
// sampling and bias, min-SNR weighting, sampling settings a config
// carries).
//
//===----------------------------------------------------------------------===//

#include "RunSpecResolver.h"

#include "absl/strings/str_join.h"

#include <cmath>

using namespace sd;
using namespace sd::detail;

namespace {

/// "NONE, FULL, ...": the remat policies in MaxDiffusion's spelling.
std::string rematPolicyList() {
  std::vector<std::string> names;
  for (const auto &entry : kRematPolicyNames)
    names.emplace_back(entry.second);
  return absl::StrJoin(names, ", ");
}

} // namespace

absl::Status Resolver::resolveRemat() {
  RematSettings &remat = spec.remat;
  Setting<std::string> name =
      pick(&F::remat, &C::rematPolicy, std::string("NONE"));
  std::optional<RematPolicyKind> kind = parseRematPolicyKind(name.value);
  if (!kind)
    return invalid(
        absl::StrFormat("unknown remat policy '%s'; expected one of %s",
                        name.value, rematPolicyList()));
  remat.policy = parsedSetting(name, *kind);
  if (*kind != RematPolicyKind::Custom) {
    // MaxDiffusion's configs list names for every policy; they mean
    // something only to CUSTOM, and naming them on the command line for
    // another policy is a mistake.
    if (flags.namesSaved || flags.namesOffloaded)
      return invalid(absl::StrFormat(
          "names_which_can_be_saved / names_which_can_be_offloaded only "
          "apply to remat policy CUSTOM, not %s",
          rematPolicyName(*kind)));
    return absl::OkStatus();
  }
  using Names = std::vector<std::string>;
  remat.namesSaved = pick(&F::namesSaved, &C::namesSaved, Names());
  remat.namesOffloaded = pick(&F::namesOffloaded, &C::namesOffloaded, Names());
  // The config's file names the setting even where it lacks the key.
  for (Setting<Names> *names : {&remat.namesSaved, &remat.namesOffloaded})
    if (names->source == SettingSource::Default && hasConfig) {
      names->source = SettingSource::Config;
      names->origin = configSource(names == &remat.namesSaved
                                       ? "names_which_can_be_saved"
                                       : "names_which_can_be_offloaded");
    }
  return absl::OkStatus();
}

absl::Status Resolver::resolveOptimizer() {
  OptimizerSettings &opt = spec.optimizer;
  RunSettings &run = spec.run;

  run.steps = pick(&F::steps, &C::maxTrainSteps, int64_t(10));
  if (run.steps.value > kMaxTrainSteps)
    return invalid(absl::StrFormat("%s: %d steps is above the limit of %d",
                                   run.steps.origin, run.steps.value,
                                   kMaxTrainSteps));
  opt.learningRate = pick(&F::learningRate, &C::learningRate, 1e-4);
  // The schedule: learning_rate_schedule_steps given (-1: the run's
  // length) decays linearly, as MaxDiffusion's schedule does, unless
  // learning_rate_schedule says otherwise; a decaying schedule without it
  // spans the run.
  opt.lrScheduleSteps =
      pick(&F::lrScheduleSteps, &C::learningRateScheduleSteps, int64_t(0));
  bool scheduleSteps = opt.lrScheduleSteps.source != SettingSource::Default;
  Setting<std::string> scheduleName =
      pick(&F::lrSchedule, &C::learningRateSchedule,
           std::string(scheduleSteps ? "linear" : "constant"));
  std::optional<LrSchedule> schedule = parseLrSchedule(scheduleName.value);
  if (!schedule)
    return invalid(absl::StrFormat(
        "%s: unknown learning-rate schedule '%s'; expected constant, linear "
        "or cosine",
        scheduleName.origin, scheduleName.value));
  opt.lrSchedule = parsedSetting(scheduleName, *schedule);
  opt.lrSchedule.origin =
      scheduleSteps && scheduleName.source == SettingSource::Default
          ? opt.lrScheduleSteps.origin
          : scheduleName.origin;
  if (opt.lrScheduleSteps.value == -1 ||
      (*schedule != LrSchedule::Constant && !scheduleSteps))
    opt.lrScheduleSteps.value = run.steps.value;
  // MaxDiffusion's warm-up is a fraction of the schedule's steps, when
  // given (a constant rate then ignores them).
  int64_t warmupBase = opt.lrScheduleSteps.value > 0 ? opt.lrScheduleSteps.value
                                                     : run.steps.value;
  if (*schedule == LrSchedule::Constant)
    opt.lrScheduleSteps.value = 0;
  if (flags.warmupSteps || !file.warmupStepsFraction) {
    opt.warmupSteps = pick(&F::warmupSteps, int64_t(0));
  } else {
    opt.warmupStepsFraction = *file.warmupStepsFraction;
    opt.warmupSteps.value = static_cast<int64_t>(
        std::llround(*file.warmupStepsFraction * warmupBase));
    opt.warmupSteps.source = SettingSource::Config;
    opt.warmupSteps.origin = configSource("warmup_steps_fraction");
  }
  opt.adamB1 = pick(&F::adamB1, &C::adamB1, 0.9);
  opt.adamB2 = pick(&F::adamB2, &C::adamB2, 0.999);
  opt.adamEps = pick(&F::adamEps, &C::adamEps, 1e-8);
  opt.weightDecay = pick(&F::weightDecay, &C::adamWeightDecay, 1e-2);
  // MaxDiffusion clips only with opt_enable_grad_global_norm_clipping.
  std::optional<double> clip = file.maxGradNorm;
  if (file.gradNormClipping && !*file.gradNormClipping)
    clip = 0.0;
  opt.maxGradNorm = pick(&F::maxGradNorm, &C::maxGradNorm, clip, 0.0);
  opt.maxGradValue = pick(&F::maxGradValue, &C::maxGradValue, 0.0);
  if (opt.lrSchedule.value != LrSchedule::Constant &&
      opt.warmupSteps.value >= opt.lrScheduleSteps.value)
    return invalid(absl::StrFormat(
        "the %s learning-rate schedule (%s) decays over %d steps, which "
        "its warm-up of %d steps (%s) leaves no room for",
        lrScheduleName(opt.lrSchedule.value), opt.lrSchedule.origin,
        opt.lrScheduleSteps.value, opt.warmupSteps.value,
        opt.warmupSteps.origin));
  if (clip && *clip == 0.0 && file.maxGradNorm && *file.maxGradNorm != 0.0 &&
      !flags.maxGradNorm)
    spec.notes.push_back("max_grad_norm: not applied, since "
                         "opt_enable_grad_global_norm_clipping is false");
  run.seed = pick(&F::seed, &C::seed, uint64_t(0));
  opt.emaDecay = pick(&F::emaDecay, &C::emaDecay, 0.0);
  opt.emaWarmup = pick(&F::emaWarmup, &C::emaWarmup, false);
  opt.emaInvGamma = pick(&F::emaInvGamma, &C::emaInvGamma, 1.0);
  opt.emaPower = pick(&F::emaPower, &C::emaPower, 2.0 / 3.0);
  return absl::OkStatus();
}

absl::Status Resolver::resolveFineTune() {
  FineTuneSettings &tune = spec.fineTune;
  using Names = std::vector<std::string>;
  const LoraConfig lora = file.loraConfig.value_or(LoraConfig());
  // --lora-rank (or any --lora-* flag) asks for LoRA as enable_lora does.
  bool loraFlag = flags.loraRank || flags.loraAlpha || flags.loraTargets;
  if (file.enableLora) {
    tune.lora.value = *file.enableLora;
    tune.lora.source = SettingSource::Config;
    tune.lora.origin = configSource("enable_lora");
  }
  if (loraFlag) {
    tune.lora.value = true;
    tune.lora.source = SettingSource::Flag;
    tune.lora.origin = flags.loraRank    ? "--lora-rank"
                       : flags.loraAlpha ? "--lora-alpha"
                                         : "--lora-targets";
  }
  tune.loraRank =
      pick(flags.loraRank, "lora-rank", "lora_config", lora.rank, int64_t(16));
  tune.loraAlpha = pick(flags.loraAlpha, "lora-alpha", "lora_config",
                        lora.alpha, static_cast<double>(tune.loraRank.value));
  tune.loraTargets = pick(flags.loraTargets, "lora-targets", "lora_config",
                          lora.targetModules, Names());
  if (!flags.loraTargets && lora.targetRegex) {
    tune.loraTargetRegex = *lora.targetRegex;
    tune.loraTargets.source = SettingSource::Config;
    tune.loraTargets.origin = configSource("lora_config");
  }
  if (tune.loraTargets.value.empty() && tune.loraTargetRegex.empty())
    tune.loraTargetRegex = std::string(kDefaultLoraTargets);
  tune.freeze = pick(&F::freeze, &C::freezeParameters, Names());
  tune.trainable = pick(&F::trainable, &C::trainableParameters, Names());
  tune.weightDecayExclude = pick(&F::weightDecayExclude, &C::weightDecayExclude,
                                 FineTuneSettings().weightDecayExclude.value);
  if (!tune.lora.value)
    return absl::OkStatus();
  if (!lora.load.empty())
    return invalid(absl::StrFormat(
        "%s: lora_config: lora_model_name_or_path [%s] names adapters to "
        "load, which sd does not apply: with enable_lora sd trains new "
        "adapters (give lora_model_name_or_path: [])",
        configSource("lora_config"), absl::StrJoin(lora.load, ", ")));
  if (!tune.freeze.value.empty() || !tune.trainable.value.empty())
    return invalid(absl::StrFormat(
        "%s: LoRA trains the adapters alone and freezes every other "
        "parameter; %s does not apply with it",
        tune.lora.origin,
        tune.freeze.value.empty() ? tune.trainable.origin
                                  : tune.freeze.origin));
  if (tune.loraRank.value < 1)
    return invalid(absl::StrFormat("%s must be at least 1, not %d",
                                   tune.loraRank.origin, tune.loraRank.value));
  if (!(tune.loraAlpha.value > 0))
    return invalid(absl::StrFormat("%s must be positive, not %g",
                                   tune.loraAlpha.origin,
                                   tune.loraAlpha.value));
  return absl::OkStatus();
}

absl::Status Resolver::resolveTimestepBias() {
  DataSettings &data = spec.data;
  const TimestepBiasConfig bias =
      file.timestepBias.value_or(TimestepBiasConfig());
  constexpr std::string_view key = "timestep_bias";
  data.timestepBiasStrategy =
      pick(flags.timestepBiasStrategy, "timestep-bias-strategy", key,
           bias.strategy, std::string("none"));
  data.timestepBiasMultiplier =
      pick(flags.timestepBiasMultiplier, "timestep-bias-multiplier", key,
           bias.multiplier, 1.0);
  data.timestepBiasPortion =
      pick(flags.timestepBiasPortion, "timestep-bias-portion", key,
           bias.portion, 0.25);
  data.timestepBiasBegin = pick(flags.timestepBiasBegin, "timestep-bias-begin",
                                key, bias.begin, int64_t(0));
  data.timestepBiasEnd = pick(flags.timestepBiasEnd, "timestep-bias-end", key,
                              bias.end, int64_t(1000));
  const Setting<std::string> &strategy = data.timestepBiasStrategy;
  if (strategy.value != "none" && strategy.value != "earlier" &&
      strategy.value != "later" && strategy.value != "range")
    return invalid(absl::StrFormat(
        "%s: unknown timestep bias strategy '%s'; expected none, earlier, "
        "later or range",
        strategy.origin, strategy.value));
  if (strategy.value == "range" &&
      data.timestepBiasBegin.value >= data.timestepBiasEnd.value)
    return invalid(absl::StrFormat(
        "%s: timestep_bias range [%d, %d) is empty: begin must be below end",
        data.timestepBiasBegin.source == SettingSource::Default
            ? data.timestepBiasEnd.origin
            : data.timestepBiasBegin.origin,
        data.timestepBiasBegin.value, data.timestepBiasEnd.value));
  // The bias reweights uniform draws; the other samplings have their own
  // density.
  if (strategy.value != "none" && data.timestepSampling.value != "uniform")
    return invalid(absl::StrFormat(
        "%s: timestep_bias strategy %s biases uniform timesteps, and "
        "timestep_sampling %s (%s) draws its own: give one of them",
        strategy.origin, strategy.value, data.timestepSampling.value,
        data.timestepSampling.origin));
  return absl::OkStatus();
}

absl::Status Resolver::resolveData() {
  DataSettings &data = spec.data;
  data.type = pick(&F::datasetType, &C::datasetType, std::string("synthetic"));
  if (data.type.value != "synthetic" && data.type.value != "sd") {
    std::string message = absl::StrFormat(
        "dataset_type '%s' is not one sd reads: 'sd' (a directory sddata "
        "writes, train_data_dir) or 'synthetic'",
        data.type.value);
    // A flag is a mistake; MaxDiffusion's own configs name its pipelines
    // (tf, hf, grain), which sd notes and replaces by synthetic data.
    if (data.type.source == SettingSource::Flag)
      return invalid(absl::StrFormat("%s: %s", data.type.origin, message));
    spec.notes.push_back(absl::StrFormat("%s: %s; training on synthetic data",
                                         data.type.origin, message));
    data.type.value = "synthetic";
  }
  const std::string &type = data.type.value;
  data.trainDataDir = pick(&F::trainDataDir, &C::trainDataDir, std::string());
  if (type == "sd" && data.trainDataDir.value.empty())
    return invalid(absl::StrFormat(
        "%s: dataset_type sd needs train_data_dir (--train-data-dir): the "
        "directory sddata wrote",
        data.type.origin));
  if (type == "synthetic" && !data.trainDataDir.value.empty())
    spec.notes.push_back(absl::StrFormat(
        "train_data_dir: %s is not read (dataset_type is synthetic)",
        data.trainDataDir.value));
  data.classDropoutProb = pick(&F::classDropoutProb, &C::classDropoutProb, 0.0);
  data.timestepSampling =
      pick(&F::timestepSampling, &C::timestepSampling, std::string("uniform"));
  const std::string &drawn = data.timestepSampling.value;
  if (drawn != "uniform" && drawn != "logit_normal" && drawn != "shift")
    return invalid(absl::StrFormat(
        "%s: unknown timestep sampling '%s'; expected uniform, logit_normal "
        "or shift",
        data.timestepSampling.origin, drawn));
  data.logitMean = pick(&F::logitMean, &C::logitMean, 0.0);
  data.logitStd = pick(&F::logitStd, &C::logitStd, 1.0);
  data.snrGamma = pick(&F::snrGamma, &C::snrGamma, -1.0);
  if (absl::Status status = resolveTimestepBias(); !status.ok())
    return status;
  data.evalEvery = pick(&F::evalEvery, &C::evalEvery, int64_t(0));
  if (flags.predictionType || file.predictionType)
    data.predictionType =
        pick(&F::predictionType, &C::predictionType, std::string());
  if (file.resolution)
    data.resolution = pick(std::optional<int64_t>(), "", "resolution",
                           file.resolution, int64_t(0));
  if (file.normNumGroups)
    data.normNumGroups = pick(std::optional<int64_t>(), "", "norm_num_groups",
                              file.normNumGroups, int64_t(0));
  SamplingSettings &sampling = spec.sampling;
  sampling.steps =
      pick(&F::numInferenceSteps, &C::numInferenceSteps, int64_t(50));
  sampling.guidanceScale = pick(&F::guidanceScale, &C::guidanceScale, 1.0);
  sampling.flowShift = pick(&F::flowShift, &C::flowShift, 1.0);
  sampling.timeShift = pick(&F::timeShift, &C::timeShift, false);
  sampling.baseShift = pick(&F::baseShift, &C::baseShift, 0.5);
  sampling.maxShift = pick(&F::maxShift, &C::maxShift, 1.15);
  return absl::OkStatus();
}
