//===- Settings.cpp - The table of the tools' settings --------------------===//
//
// The rows of sd/Config/Settings.h. Rows with a config key come in the
// order the reader lists its keys, which decides the nearest key to a
// typo on a tie; rows with only a flag follow.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/Settings.h"

#include "absl/strings/str_format.h"

#include <cmath>

using namespace sd;

namespace {

using F = RunSpecFlags;
using C = RunConfig;
using G = FlagGroup;

// The requirements, as messages quote them.
constexpr Requirement kPositive{[](double v) { return v > 0; },
                                "must be positive"};
constexpr Requirement kNotNegative{[](double v) { return v >= 0; },
                                   "must not be negative"};
constexpr Requirement kAtLeastOne{[](double v) { return v >= 1; },
                                  "must be at least 1"};
constexpr Requirement kBelowOne{[](double v) { return v >= 0 && v < 1; },
                                "must be in [0, 1)"};
constexpr Requirement kProbability{[](double v) { return v >= 0 && v <= 1; },
                                   "must be in [0, 1]"};
/// -1 and 0 turn a periodic action off (MaxDiffusion spells it -1).
constexpr Requirement kPeriod{[](double v) { return v >= -1; },
                              "must be -1, 0 or at least 1"};
/// MaxDiffusion's -1 (or 0) for off, else a positive value.
constexpr Requirement kOffOrNotNegative{
    [](double v) { return v == -1 || v >= 0; },
    "must be -1 or 0 (off), or positive"};
/// MaxDiffusion's -1 for unset.
constexpr Requirement kCountOrUnset{[](double v) { return v == -1 || v >= 1; },
                                    "must be -1 or at least 1"};
/// A bucket of up to 1 TiB (bucket_cap_mb), whose bytes fit an int64_t.
constexpr Requirement kBucketMb{[](double v) { return v >= 0 && v <= 1048576; },
                                "must be in [0, 1048576] (MiB)"};
constexpr Requirement kMeshSize{[](double v) { return v == -1 || v >= 1; },
                                "must be -1 (fill) or at least 1"};
constexpr Requirement kInferenceSteps{
    [](double v) { return v >= 1 && v <= double(kMaxInferenceSteps); },
    "must be in [1, 100000]"};

constexpr std::string_view kPredictionTypes[] = {"epsilon", "v_prediction",
                                                 "flow"};
constexpr std::string_view kTimestepBiasStrategies[] = {"none", "earlier",
                                                        "later", "range"};
constexpr Requirement kPortion{[](double v) { return v > 0 && v <= 1; },
                               "must be in (0, 1]"};
constexpr Requirement kTimestepIndex{
    [](double v) { return v >= 0 && v <= 1000; }, "must be in [0, 1000]"};
constexpr std::string_view kTimestepSamplings[] = {"uniform", "logit_normal",
                                                   "shift"};
/// What weights_dtype and activations_dtype may be (parseDType's names).
constexpr std::string_view kDTypes[] = {"float32", "bfloat16", "f32", "fp32",
                                        "bf16"};

/// A row under construction: flag(...) or key(...), then the rest.
struct Row {
  SettingRow row;

  Row key(std::string_view name, KeyField field) const {
    Row next = *this;
    next.row.key = name;
    next.row.keyField = field;
    return next;
  }
  Row check(Requirement requirement) const {
    Row next = *this;
    next.row.check = requirement;
    return next;
  }
  Row flagCheck(Requirement requirement) const {
    Row next = *this;
    next.row.flagCheck = requirement;
    return next;
  }
  Row max(int64_t limit) const {
    Row next = *this;
    next.row.flagMax = limit;
    return next;
  }
  Row choices(llvm::ArrayRef<std::string_view> values,
              std::string_view noun) const {
    Row next = *this;
    next.row.choices = values;
    next.row.choiceNoun = noun;
    return next;
  }
  Row value(std::string_view name) const {
    Row next = *this;
    next.row.valueName = name;
    return next;
  }
  Row alias(std::string_view name) const {
    Row next = *this;
    next.row.alias = name;
    return next;
  }
};

Row flag(std::string_view name, unsigned tools, FlagField field, G group,
         std::string_view help) {
  Row row;
  row.row.flag = name;
  row.row.tools = tools;
  row.row.flagField = field;
  row.row.group = group;
  row.row.help = help;
  return row;
}

Row key(std::string_view name, KeyField field) {
  return Row().key(name, field);
}

/// The config's mesh sizes.
std::vector<SettingRow> meshKeyRows() {
  return {
      key("ici_data_parallelism", MeshAxisField{false, 0}).check(kMeshSize).row,
      key("ici_fsdp_parallelism", MeshAxisField{false, 1}).check(kMeshSize).row,
      key("ici_context_parallelism", MeshAxisField{false, 2})
          .check(kMeshSize)
          .row,
      key("ici_tensor_parallelism", MeshAxisField{false, 3})
          .check(kMeshSize)
          .row,
      key("dcn_data_parallelism", MeshAxisField{true, 0}).check(kMeshSize).row,
      key("dcn_fsdp_parallelism", MeshAxisField{true, 1}).check(kMeshSize).row,
      key("dcn_context_parallelism", MeshAxisField{true, 2})
          .check(kMeshSize)
          .row,
      key("dcn_tensor_parallelism", MeshAxisField{true, 3})
          .check(kMeshSize)
          .row,
  };
}

/// The numbers sd reads, most with the flag that sets the same setting.
std::vector<SettingRow> numberRows() {
  return {
      flag("per-device-batch", kAllTools, &F::perDeviceBatch, G::Mesh,
           "MaxDiffusion's per_device_batch_size (may be fractional); "
           "global batch = this × devices")
          .key("per_device_batch_size", &C::perDeviceBatchSize)
          .check(kPositive)
          .row,
      flag("lr", kTrainTools, &F::learningRate, G::Step,
           "Peak learning rate (default 1e-4)")
          .key("learning_rate", &C::learningRate)
          .check(kNotNegative)
          .row,
      flag("adam-b1", kTrainTools, &F::adamB1, G::Step,
           "AdamW beta1 (default 0.9)")
          .key("adam_b1", &C::adamB1)
          .check(kBelowOne)
          .row,
      flag("adam-b2", kTrainTools, &F::adamB2, G::Step,
           "AdamW beta2 (default 0.999)")
          .key("adam_b2", &C::adamB2)
          .check(kBelowOne)
          .row,
      flag("adam-eps", kTrainTools, &F::adamEps, G::Step,
           "AdamW epsilon (default 1e-8)")
          .key("adam_eps", &C::adamEps)
          .check(kPositive)
          .row,
      flag("adam-weight-decay", kTrainTools, &F::weightDecay, G::Step,
           "AdamW decoupled weight decay (default 1e-2)")
          .key("adam_weight_decay", &C::adamWeightDecay)
          .check(kNotNegative)
          .alias("weight-decay")
          .row,
      flag("max-grad-norm", kTrainTools, &F::maxGradNorm, G::Step,
           "Clip gradients to this global norm (default 0: no clipping)")
          .key("max_grad_norm", &C::maxGradNorm)
          .check(kNotNegative)
          .row,
      flag("max-grad-value", kTrainTools, &F::maxGradValue, G::Step,
           "max_grad_value: clip each gradient element to [-v, v], before "
           "the norm (default 0: no clipping)")
          .key("max_grad_value", &C::maxGradValue)
          .check(kNotNegative)
          .row,
      flag("snr-gamma", kTrainTools, &F::snrGamma, G::Step,
           "snr_gamma: weight each sample's loss by min(SNR, gamma)/SNR "
           "(epsilon) or /(SNR + 1) (v_prediction), min-SNR weighting "
           "(default -1: the plain loss)")
          .key("snr_gamma", &C::snrGamma)
          .check(kOffOrNotNegative)
          .row,
      flag("logit-mean", kSdrun, &F::logitMean, G::Run,
           "logit_mean of timestep_sampling logit_normal (default 0)")
          .key("logit_mean", &C::logitMean)
          .row,
      flag("logit-std", kSdrun, &F::logitStd, G::Run,
           "logit_std of timestep_sampling logit_normal (default 1)")
          .key("logit_std", &C::logitStd)
          .check(kPositive)
          .row,
      key("warmup_steps_fraction", &C::warmupStepsFraction)
          .check(kProbability)
          .row,
      key("resolution", &C::resolution).check(kPositive).row,
      key("norm_num_groups", &C::normNumGroups).check(kPositive).row,
      flag("class-dropout-prob", kSdrun, &F::classDropoutProb, G::Run,
           "Probability that a sample's label is dropped to the null "
           "class, for classifier-free guidance (DiT: 0.1; default 0)")
          .key("class_dropout_prob", &C::classDropoutProb)
          .check(kProbability)
          .row,
      flag("ema-decay", kTrainTools, &F::emaDecay, G::Step,
           "ema_decay: keep an exponential moving average of the "
           "parameters in the step (DiT: 0.9999; default 0: none)")
          .key("ema_decay", &C::emaDecay)
          .check(kBelowOne)
          .row,
      flag("ema-inv-gamma", kTrainTools, &F::emaInvGamma, G::Step,
           "ema_inv_gamma: the EMA warm-up's inverse gamma (default 1)")
          .key("ema_inv_gamma", &C::emaInvGamma)
          .check(kPositive)
          .row,
      flag("ema-power", kTrainTools, &F::emaPower, G::Step,
           "ema_power: the EMA warm-up's power (default 2/3)")
          .key("ema_power", &C::emaPower)
          .check(kPositive)
          .row,
      flag("guidance-scale", kSdsample, &F::guidanceScale, G::Sample,
           "Classifier-free guidance scale (guidance_scale; default 1: "
           "none); for a model with a distilled guidance input (Flux.1-dev) "
           "that input (default: the model's sd.guidance)")
          .key("guidance_scale", &C::guidanceScale)
          .check(kNotNegative)
          .row,
      flag("true-cfg-scale", kSdsample, &F::trueCfgScale, G::Sample,
           "Classifier-free guidance with the negative prompt for a model "
           "with a distilled guidance input (diffusers' true_cfg_scale; "
           "default 1: none)")
          .check(kNotNegative)
          .row,
      flag("flow-shift", kSdsample | kSdrun, &F::flowShift, G::Sample,
           "flow_shift: Euler's time shift s, t' = s·t/(1 + (s-1)·t) "
           "(Wan2.1: 3 at 480p, 5 at 720p; default 1: none)")
          .key("flow_shift", &C::flowShift)
          .check(kPositive)
          .row,
      flag("base-shift", kSdsample, &F::baseShift, G::Sample,
           "base_shift: Flux's time-shift exponent at 256 image tokens "
           "(default 0.5)")
          .key("base_shift", &C::baseShift)
          .row,
      flag("max-shift", kSdsample, &F::maxShift, G::Sample,
           "max_shift: Flux's time-shift exponent at 4096 image tokens "
           "(default 1.15)")
          .key("max_shift", &C::maxShift)
          .row,
      flag("bucket-cap-mb", kTrainTools, &F::bucketCapMb, G::Step,
           "bucket_cap_mb: MiB of gradient reductions (all-reduces, "
           "reduce-scatters) that run back to back, as in PyTorch DDP's "
           "buckets (default 0: each where its gradient is ready; DDP's "
           "is 25)")
          .key("bucket_cap_mb", &C::bucketCapMb)
          .check(kBucketMb)
          .row,
  };
}

/// The integers.
std::vector<SettingRow> integerRows() {
  return {
      flag("steps", kSdrun, &F::steps, G::Run,
           "Steps the run ends at (max_train_steps; default 10)")
          .key("max_train_steps", &C::maxTrainSteps)
          .check(kAtLeastOne)
          .row,
      flag("checkpoint-every", kSdrun, &F::checkpointEvery, G::Run,
           "checkpoint_every: steps between checkpoints (0 or -1: only "
           "at the end)")
          .key("checkpoint_every", &C::checkpointEvery)
          .check(kPeriod)
          .row,
      flag("trace-skip-steps", kSdrun, &F::traceSkipSteps, G::Run,
           "skip_first_n_steps_for_profiler: steps run before the trace "
           "starts (default 0)")
          .key("skip_first_n_steps_for_profiler",
               &C::skipFirstNStepsForProfiler)
          .check(kNotNegative)
          .row,
      flag("trace-steps", kSdrun, &F::traceSteps, G::Run,
           "profiler_steps: steps the trace covers (default 10)")
          .key("profiler_steps", &C::profilerSteps)
          .check(kAtLeastOne)
          .row,
      flag("ulysses-shards", kAllTools, &F::ulyssesShards, G::Attention,
           "ulysses_shards: devices per Ulysses group of "
           "--attention=ulysses_ring (the ring runs across the groups)")
          .key("ulysses_shards", &C::ulyssesShards)
          .check(kCountOrUnset)
          .flagCheck(kAtLeastOne)
          .row,
      flag("eval-every", kSdrun, &F::evalEvery, G::Run,
           "eval_every: steps between held-out losses (default 0: never)")
          .key("eval_every", &C::evalEvery)
          .check(kPeriod)
          .row,
      flag("num-inference-steps", kSdsample, &F::numInferenceSteps, G::Sample,
           "Sampler steps (num_inference_steps; default 50)")
          .key("num_inference_steps", &C::numInferenceSteps)
          .check(kInferenceSteps)
          .row,
      flag("flash-min-seq-length", kAllTools, &F::flashMinSeqLength,
           G::Attention,
           "flash_min_seq_length: attention whose query is shorter "
           "stays dot_product under a tiled --attention (default 0: "
           "none)")
          .key("flash_min_seq_length", &C::flashMinSeqLength)
          .check(kNotNegative)
          .row,
  };
}

/// The strings and lists of names.
std::vector<SettingRow> stringRows() {
  return {
      flag("output-dir", kSdrun, &F::outputDir, G::Run,
           "output_dir: metrics.csv and loss.png go to "
           "OUTPUT_DIR/RUN_NAME/")
          .key("output_dir", &C::outputDir)
          .row,
      flag("run-name", kSdrun, &F::runName, G::Run,
           "run_name (default: the date and time)")
          .key("run_name", &C::runName)
          .row,
      flag("pretrained", kSdrun, &F::pretrained, G::Run,
           "pretrained_model_name_or_path: start from a local diffusers "
           "model folder (its transformer/ config.json, checked against "
           "the model, and weights); '' for none")
          .key("pretrained_model_name_or_path", &C::pretrained)
          .value("DIR")
          .row,
      flag("weights-dtype", kAllTools, &F::weightsDtype, G::Attention,
           "weights_dtype: float32 (default) or bfloat16, the parameters' "
           "compute copy, cast from their f32 master copies")
          .key("weights_dtype", &C::weightsDtype)
          .choices(kDTypes, "dtype")
          .row,
      flag("activations-dtype", kAllTools, &F::activationsDtype, G::Attention,
           "activations_dtype: float32 (default) or bfloat16, what the "
           "layers compute in (products and norms accumulate in f32)")
          .key("activations_dtype", &C::activationsDtype)
          .choices(kDTypes, "dtype")
          .row,
      flag("grad-reduce-dtype", kTrainTools, &F::gradReduceDtype, G::Step,
           "grad_reduce_dtype: float32 (default) or bfloat16, what the "
           "gradients are reduced in across devices under bfloat16 "
           "activations")
          .key("grad_reduce_dtype", &C::gradReduceDtype)
          .choices(kDTypes, "dtype")
          .row,
      flag("attention", kAllTools, &F::attention, G::Attention,
           "Attention: dot_product (default: one score matrix per "
           "head), flash (tiled into flash-attention blocks; a sharded "
           "sequence's keys and values all-gathered), ring, ulysses or "
           "ulysses_ring (tiled, self-attention spread over the "
           "sequence's mesh axes), or auto (the one the cost model "
           "finds cheapest)")
          .key("attention", &C::attention)
          .row,
      flag("dataset-type", kSdrun, &F::datasetType, G::Run,
           "dataset_type: synthetic (default: a generated data set of "
           "one batch, fresh noise every step) or sd (--train-data-dir)")
          .key("dataset_type", &C::datasetType)
          .row,
      flag("train-data-dir", kSdrun, &F::trainDataDir, G::Run,
           "train_data_dir: a data set sddata wrote (dataset_type sd)")
          .key("train_data_dir", &C::trainDataDir)
          .value("dir")
          .row,
      flag("prediction-type", kSdsample, &F::predictionType, G::Sample,
           "epsilon, v_prediction or flow, when the model does not "
           "record it (default epsilon)")
          .key("prediction_type", &C::predictionType)
          .choices(kPredictionTypes, "prediction type")
          .row,
      flag("timestep-sampling", kSdrun, &F::timestepSampling, G::Run,
           "timestep_sampling of a flow model's training timesteps: "
           "uniform (default), logit_normal (sigmoid of a normal, "
           "logit_mean and logit_std) or shift (by flow_shift)")
          .key("timestep_sampling", &C::timestepSampling)
          .choices(kTimestepSamplings, "timestep sampling")
          .row,
      key("timestep_bias", &C::timestepBias).row,
      flag("timestep-bias-strategy", kSdrun, &F::timestepBiasStrategy, G::Run,
           "timestep_bias's strategy: draw the uniform training timesteps "
           "--timestep-bias-multiplier times as often in the earlier or later "
           "--timestep-bias-portion of [0, 1), or in the range [begin, end) "
           "of 1000 steps (default none)")
          .choices(kTimestepBiasStrategies, "timestep bias strategy")
          .row,
      flag("timestep-bias-multiplier", kSdrun, &F::timestepBiasMultiplier,
           G::Run, "timestep_bias's multiplier (default 1)")
          .check(kPositive)
          .row,
      flag("timestep-bias-portion", kSdrun, &F::timestepBiasPortion, G::Run,
           "timestep_bias's portion, of strategies earlier and later "
           "(default 0.25)")
          .check(kPortion)
          .row,
      flag("timestep-bias-begin", kSdrun, &F::timestepBiasBegin, G::Run,
           "timestep_bias's begin, of strategy range (default 0)")
          .check(kTimestepIndex)
          .row,
      flag("timestep-bias-end", kSdrun, &F::timestepBiasEnd, G::Run,
           "timestep_bias's end, of strategy range (default 1000)")
          .check(kTimestepIndex)
          .row,
      flag("lr-schedule", kTrainTools, &F::lrSchedule, G::Step,
           "learning_rate_schedule: constant (the default without "
           "learning_rate_schedule_steps), linear (MaxDiffusion's) or "
           "cosine decay to 0 after the warm-up")
          .key("learning_rate_schedule", &C::learningRateSchedule)
          .choices(kLrSchedules, "learning-rate schedule")
          .row,
      flag("names-saved", kTrainTools, &F::namesSaved, G::Step,
           "CUSTOM: names_which_can_be_saved (comma-separated sd.names)")
          .key("names_which_can_be_saved", &C::namesSaved)
          .row,
      flag("names-offloaded", kTrainTools, &F::namesOffloaded, G::Step,
           "CUSTOM: names_which_can_be_offloaded (comma-separated)")
          .key("names_which_can_be_offloaded", &C::namesOffloaded)
          .row,
  };
}

/// The booleans, the rules, the seed, the remat policy and the flash sizes.
std::vector<SettingRow> otherKeyRows() {
  return {
      key("opt_enable_grad_global_norm_clipping", &C::gradNormClipping).row,
      key("enable_profiler", &C::enableProfiler).row,
      flag("ema-warmup", kTrainTools, &F::emaWarmup, G::Step,
           "ema_warmup: the EMA decay after s steps is min(ema_decay, 1 - (1 "
           "+ s/ema_inv_gamma)^-ema_power) (diffusers' use_ema_warmup) "
           "instead of min(ema_decay, (1 + s)/(10 + s))")
          .key("ema_warmup", &C::emaWarmup)
          .row,
      flag("time-shift", kSdsample, &F::timeShift, G::Sample,
           "time_shift: Euler's resolution-dependent shift e^mu, mu from "
           "base_shift to max_shift over 256 to 4096 image tokens (default "
           "on for Flux, which takes a pooled text vector)")
          .key("time_shift", &C::timeShift)
          .row,
      // The rest.
      flag("rules", kAllTools, &F::rules, G::Mesh,
           "Logical axis rules: dit (default), sdxl, flux, wan, or a "
           "MaxDiffusion YAML file")
          .key("logical_axis_rules", &C::rules)
          .row,
      flag("seed", kSdrun, &F::seed, G::Run,
           "Seed of the parameters and the batch")
          .key("seed", &C::seed)
          .check(kNotNegative)
          .row,
      flag("remat", kTrainTools, &F::remat, G::Step,
           "Remat policy: NONE (default), FULL, MATMUL_WITHOUT_BATCH, "
           "OFFLOAD_MATMUL_WITHOUT_BATCH, HIDDEN_STATE_WITH_OFFLOAD, "
           "FLUX_OPTIMIZED, CUSTOM")
          .key("remat_policy", &C::rematPolicy)
          .choices(kRematPolicies, "policy")
          .row,
      flag("flash-block-sizes", kAllTools, &F::flashBlockSizes, G::Attention,
           "flash_block_sizes as MaxDiffusion's JSON, e.g. "
           "'{\"block_q\": 256, \"block_kv\": 1024}' (default: derived "
           "from the cache)")
          .key("flash_block_sizes", &C::flashBlockSizes)
          .row,
  };
}

/// The flags without a config key: the mesh, the network, the batch and
/// the training step.
std::vector<SettingRow> meshFlagRows() {
  return {
      flag("mesh", kAllTools, &F::mesh, G::Mesh,
           "Device mesh (ICI), e.g. data:8,fsdp:4; -1 fills from --devices, "
           "or one device a core (default: one device); sdrun: auto plans "
           "it for --devices (sdopt --plan's search)")
          .row,
      flag("devices", kAllTools, &F::devices, G::Mesh,
           "Device count (fills a -1 mesh axis)")
          .check(kPositive)
          .row,
      flag("dcn-mesh", kAllTools, &F::dcnMesh, G::Mesh,
           "Mesh part across processes/hosts, e.g. data:2 (sdrun and "
           "sdsample: one MPI rank per process, launched by mpirun)")
          .row,
      flag("processes", kSdopt, &F::processes, G::Mesh,
           "Process count (fills a -1 DCN axis)")
          .check(kPositive)
          .row,
      flag("ici-bandwidth", kAllTools, &F::iciBandwidth, G::Mesh,
           "Cost model: bytes per second a device sends to the devices "
           "of its process, e.g. 100GB/s (default 10GB/s, shared memory)")
          .row,
      flag("dcn-bandwidth", kAllTools, &F::dcnBandwidth, G::Mesh,
           "Cost model: bytes per second a process sends to other "
           "processes, shared by its devices, e.g. 100Gb/s (default "
           "25Gb/s Ethernet)")
          .row,
      flag("profile", kAllTools, &F::profile, G::Mesh,
           "Hardware profile: cpu, tpu-v5p, tpu-v6e, h100-sxm or a YAML "
           "file (docs/planner.md); its links price the collectives, and "
           "sdopt's report predicts the step's time on it")
          .row,
      flag("ici-latency", kAllTools, &F::iciLatency, G::Mesh,
           "Cost model: seconds per ring step inside a process, e.g. "
           "5us (default 1us)")
          .row,
      flag("dcn-latency", kAllTools, &F::dcnLatency, G::Mesh,
           "Cost model: seconds per ring step between processes "
           "(default 25us)")
          .row,
      flag("batch", kTrainTools, &F::batch, G::Mesh,
           "Global batch (default: the model's)")
          .alias("global-batch")
          .check(kPositive)
          .max(kMaxGlobalBatch)
          .row,
      flag("batch", kSdsample, &F::batch, G::Mesh,
           "Rows of one call of the device program (default: the "
           "model's; guidance uses two a sample)")
          .check(kPositive)
          .max(kMaxGlobalBatch)
          .row,
      // The training step.
      flag("grad-accum", kTrainTools, &F::gradAccum, G::Step,
           "gradient_accumulation_steps: microbatches whose gradients one "
           "optimizer step accumulates (in f32; default 1); the global "
           "batch is per_device_batch_size × devices × this")
          .key("gradient_accumulation_steps", &C::gradientAccumulationSteps)
          .check(kAtLeastOne)
          .row,
      flag("lr-schedule-steps", kTrainTools, &F::lrScheduleSteps, G::Step,
           "learning_rate_schedule_steps: steps of warm-up and decay (-1: "
           "the run's; given, the rate decays linearly, as MaxDiffusion's)")
          .key("learning_rate_schedule_steps", &C::learningRateScheduleSteps)
          .check(kCountOrUnset)
          .row,
      flag("warmup-steps", kTrainTools, &F::warmupSteps, G::Step,
           "Linear warm-up steps (default 0)")
          .check(kNotNegative)
          .row,
      // Fine-tuning.
      key("enable_lora", &C::enableLora).row,
      key("lora_config", &C::loraConfig).row,
      flag("lora-rank", kTrainTools, &F::loraRank, G::Step,
           "Train LoRA adapters of this rank (lora_config's rank; turns "
           "LoRA on as enable_lora does; default 16)")
          .check(kAtLeastOne)
          .max(kMaxLoraRank)
          .row,
      flag("lora-alpha", kTrainTools, &F::loraAlpha, G::Step,
           "LoRA's lora_alpha: the update is scaled by alpha / rank "
           "(default: the rank)")
          .check(kPositive)
          .row,
      flag("lora-targets", kTrainTools, &F::loraTargets, G::Step,
           "LoRA's target_modules (comma-separated module names, matched "
           "as PEFT does; default: the attention projections)")
          .row,
      flag("freeze", kTrainTools, &F::freeze, G::Step,
           "freeze_parameters: glob patterns of the parameters not to "
           "train (comma-separated, e.g. 'blocks.0.*,x_embedder.*')")
          .key("freeze_parameters", &C::freezeParameters)
          .row,
      flag("trainable-parameters", kTrainTools, &F::trainable, G::Step,
           "trainable_parameters: glob patterns of the only parameters to "
           "train (the others are frozen)")
          .key("trainable_parameters", &C::trainableParameters)
          .row,
      flag("weight-decay-exclude", kTrainTools, &F::weightDecayExclude, G::Step,
           "weight_decay_exclude: glob patterns of the parameters without "
           "weight decay (default '*bias,*norm*,*embedding_table*'; '' "
           "decays all)")
          .key("weight_decay_exclude", &C::weightDecayExclude)
          .row,
  };
}

/// The devices.
std::vector<SettingRow> deviceFlagRows() {
  return {
      flag("config", kSdrun, &F::config, G::Device,
           "A MaxDiffusion-style YAML config (ici_*/dcn_* parallelism, "
           "per_device_batch_size, remat_policy, learning_rate, adam_*, "
           "max_train_steps, ...)")
          .value("file.yml")
          .row,
      flag("config", kSdsample, &F::config, G::Device,
           "A MaxDiffusion-style YAML config: the mesh (ici_*/dcn_*), "
           "per_device_batch_size, logical_axis_rules and the attention "
           "keys as sdrun reads them, and num_inference_steps, "
           "guidance_scale, prediction_type")
          .value("file.yml")
          .row,
      flag("threads-per-device", kDeviceTools, &F::threadsPerDevice, G::Device,
           "OpenMP threads per device (default: cores / devices, >= 1)")
          .check(kNotNegative)
          .max(kMaxThreadsPerDevice)
          .row,
      flag("device-memory", kAllTools, &F::deviceMemory, G::Device,
           "Device memory budget per device, e.g. 512MiB, 2GB (default: "
           "unlimited); sdopt --plan and sdrun --mesh=auto plan for it "
           "(default: the profile's device memory)")
          .row,
      flag("host-memory", kDeviceTools, &F::hostMemory, G::Device,
           "Host memory budget per device (default: unlimited)")
          .row,
      flag("host-memory-limit", kDeviceTools, &F::hostMemoryLimit, G::Device,
           "Resident memory one process may use, e.g. 6GiB: a run whose "
           "predicted peak is larger is refused before compiling "
           "(default: the machine's memory over its processes)")
          .row,
      flag("cache-dir", kDeviceTools, &F::cacheDir, G::Device,
           "Where compiled programs are cached (default: $SD_CACHE_DIR, "
           "$XDG_CACHE_HOME/sd, ~/.cache/sd)")
          .row,
      flag("collective-timeout", kDeviceTools, &F::collectiveTimeout, G::Device,
           "Under mpirun: seconds a collective waits for another rank "
           "before the run fails naming it (default 600)")
          .check(kPositive)
          .value("seconds")
          .row,
  };
}

/// sdrun's run.
std::vector<SettingRow> runFlagRows() {
  return {
      flag("metrics", kSdrun, &F::metricsPath, G::Run,
           "Write one JSON object per step to this file")
          .value("file.jsonl")
          .row,
      flag("verify", kSdrun, &F::verify, G::Run,
           "Also run the steps on one device and compare the losses and "
           "updated parameters (exit 1 above 1e-4 relative difference; "
           "2^-8, one bf16 step, with bfloat16 activations)")
          .row,
      flag("allow-nonfinite-loss", kSdrun, &F::allowNonfiniteLoss, G::Run,
           "Go on after a step whose loss is NaN or infinite (default: "
           "stop there with an error, before checkpointing it)")
          .row,
      flag("trace-all-ranks", kSdrun, &F::traceAllRanks, G::Run,
           "Under mpirun: every rank writes its devices' trace (rank r: "
           "FILE.rankR.json beside --trace=FILE.json), not rank 0 alone")
          .row,
      flag("checkpoint-dir", kSdrun, &F::checkpointDir, G::Run,
           "Write sharded checkpoints here (every --checkpoint-every "
           "steps and at the end)")
          .row,
      flag("resume", kSdrun, &F::resume, G::Run,
           "Continue from the latest complete checkpoint in "
           "--checkpoint-dir (on any mesh)")
          .row,
      flag("init-from", kSdrun, &F::initFrom, G::Run,
           "Load the parameters by name from a safetensors file, or a "
           "sharded one's *.safetensors.index.json")
          .value("file.safetensors")
          .row,
      flag("allow-missing", kSdrun, &F::allowMissing, G::Run,
           "With --init-from or --pretrained: parameters the file lacks keep "
           "their seeded values (default: an error naming them)")
          .row,
      flag("export-ema", kSdrun, &F::exportEmaPath, G::Run,
           "Write the EMA parameters (ema_decay) to a safetensors file, "
           "under the parameters' names")
          .value("file.safetensors")
          .row,
      flag("export", kSdrun, &F::exportPath, G::Run,
           "Write the trained parameters to a safetensors file (with LoRA, "
           "the adapters alone, in PEFT's names)")
          .value("file.safetensors")
          .row,
      flag("export-merged", kSdrun, &F::exportMergedPath, G::Run,
           "With LoRA: write the model with the adapters merged into their "
           "base weights (W + alpha/rank·B·A)")
          .value("file.safetensors")
          .row,
      flag("export-dtype", kSdrun, &F::exportDtype, G::Run,
           "What --export and --export-ema store: float32 or bfloat16 "
           "(default: weights_dtype)")
          .value("dtype")
          .row,
      flag("trace", kSdrun, &F::tracePath, G::Run,
           "Write a Chrome trace (one track per device; open in "
           "Perfetto)")
          .value("file.json")
          .row,
  };
}

/// sdsample's sampling.
std::vector<SettingRow> sampleFlagRows() {
  return {
      flag("weights", kSdsample, &F::weights, G::Sample,
           "The parameters, by name, from a safetensors file (sdrun "
           "--export or --export-ema)")
          .value("file.safetensors")
          .row,
      flag("checkpoint-dir", kSdsample, &F::checkpointDir, G::Sample,
           "The parameters from the latest complete checkpoint here")
          .value("dir")
          .row,
      flag("ema", kSdsample, &F::ema, G::Sample,
           "Use the EMA weights (\"ema NAME\" tensors); the default when "
           "there are any")
          .row,
      flag("no-ema", kSdsample, &F::noEma, G::Sample, "Use the raw parameters")
          .row,
      flag("sampler", kSdsample, &F::sampler, G::Sample,
           "ddpm, ddim (default for epsilon and v_prediction) or euler "
           "(flow)")
          .row,
      flag("seed", kSdsample, &F::seed, G::Sample,
           "Seed of the noise (default 0)")
          .row,
      flag("samples-per-class", kSdsample, &F::samplesPerClass, G::Sample,
           "Samples of each class or prompt: the grid's columns (default "
           "1)")
          .alias("samples-per-prompt")
          .row,
      flag("lora", kSdsample, &F::loraWeights, G::Sample,
           "LoRA adapters to merge into the weights (sdrun --export of a "
           "LoRA run, or PEFT/diffusers names X.lora_A.weight, "
           "X.lora_B.weight), scaled by lora_alpha / r from the file's "
           "metadata")
          .value("adapters.safetensors")
          .row,
      flag("lora-scale", kSdsample, &F::loraScale, G::Sample,
           "Multiplies the merged LoRA update (default 1)")
          .check(kNotNegative)
          .row,
      flag("text-states", kSdsample, &F::textStates, G::Sample,
           "The text encoder's outputs to sample a text-conditioned model "
           "(Wan, Flux) from, a grid row per prompt: prompt_embeds [N, L, "
           "D], Flux's pooled_prompt_embeds [N, P], and for guidance "
           "negative_prompt_embeds (and negative_pooled_prompt_embeds) [1 "
           "or N, ...]")
          .value("states.safetensors")
          .row,
      flag("classes", kSdsample, &F::classes, G::Sample,
           "The classes to sample, a grid row each (default: all)")
          .row,
      flag("clip-x0", kSdsample, &F::clipX0, G::Sample,
           "Clip each x0 estimate to [-1, 1] (ddpm, ddim; default on, "
           "--clip-x0=false turns it off)")
          .row,
      flag("grid", kSdsample, &F::grid, G::Sample,
           "Write the samples as a PNG grid, a row per class")
          .value("file.png")
          .row,
      flag("grid-scale", kSdsample, &F::gridScale, G::Sample,
           "Pixels per sample pixel in the grid (default: cells of at "
           "least 32 pixels)")
          .row,
      flag("output", kSdsample, &F::output, G::Sample,
           "Write the samples [n, H, W, C] and labels [n] as "
           "safetensors (with --predict: the output `out`)")
          .value("file.safetensors")
          .row,
      flag("predict", kSdsample, &F::predict, G::Sample,
           "Instead of sampling, run the model's @forward once on these "
           "inputs, named and laid out as the reference's forward() takes "
           "them (DiT: x [B, C, H, W], t [B] in [0, 1000), y [B] I64)")
          .value("inputs.safetensors")
          .row,
  };
}

} // namespace

std::string_view SettingRow::keyRequirement(double value) const {
  return check.valid && !check.valid(value) ? check.text : "";
}

std::string_view SettingRow::flagRequirement(double value) const {
  const Requirement &requirement = flagCheck.valid ? flagCheck : check;
  return requirement.valid && !requirement.valid(value) ? requirement.text : "";
}

llvm::ArrayRef<SettingRow> sd::settingRows() {
  static const std::vector<SettingRow> rows = [] {
    std::vector<SettingRow> all;
    for (std::vector<SettingRow> (*group)() :
         {&meshKeyRows, &numberRows, &integerRows, &stringRows, &otherKeyRows,
          &meshFlagRows, &deviceFlagRows, &runFlagRows, &sampleFlagRows}) {
      std::vector<SettingRow> rows = group();
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }();
  return rows;
}

const SettingRow *sd::findKeyRow(std::string_view key) {
  for (const SettingRow &row : settingRows())
    if (row.hasKey() && row.key == key)
      return &row;
  return nullptr;
}

const SettingRow *sd::findKeyRow(const KeyField &field) {
  for (const SettingRow &row : settingRows())
    if (row.hasKey() && row.keyField == field)
      return &row;
  return nullptr;
}

const SettingRow *sd::findFlagRow(const FlagField &field) {
  for (const SettingRow &row : settingRows())
    if (row.hasFlag() && row.flagField == field)
      return &row;
  return nullptr;
}
