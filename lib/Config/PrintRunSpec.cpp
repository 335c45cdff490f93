//===- PrintRunSpec.cpp - sdrun --print-config ----------------------------===//
//
// printRunSpec: each setting of a resolved RunSpec as a row of key, value
// and origin, then the notes.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunSpec.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace sd;

namespace {

/// `%g`: 0.3, 1.2, 8.
std::string shortDouble(double value) { return absl::StrFormat("%g", value); }

/// The rows of --print-config: key, value, origin.
class SettingsTable {
public:
  template <typename T>
  void add(std::string_view key, const Setting<T> &setting) {
    add(key, display(setting.value), setting.origin);
  }
  void add(std::string_view key, std::string value, std::string origin) {
    rows.push_back({std::string(key), std::move(value), std::move(origin)});
  }

  void print(llvm::raw_ostream &os) const {
    size_t width = 0;
    for (const Row &row : rows)
      width = std::max(width, row.key.size());
    for (const Row &row : rows)
      os << "  " << llvm::left_justify(row.key, width) << "  " << row.value
         << "  (" << row.origin << ")\n";
  }

private:
  static std::string display(const std::string &value) {
    return value.empty() ? "''" : value;
  }
  static std::string display(double value) { return shortDouble(value); }
  static std::string display(int64_t value) { return std::to_string(value); }
  static std::string display(uint64_t value) { return std::to_string(value); }
  static std::string display(const std::vector<std::string> &value) {
    return "[" + absl::StrJoin(value, ", ") + "]";
  }
  static std::string display(RematPolicyKind value) {
    return std::string(rematPolicyName(value));
  }
  static std::string display(LrSchedule value) {
    return std::string(lrScheduleName(value));
  }
  static std::string display(AttentionKind value) {
    return std::string(attentionKindName(value));
  }
  static std::string display(DType value) {
    return std::string(dtypeName(value));
  }
  static std::string display(const FlashBlockSizes &value) {
    return value.toString();
  }

  struct Row {
    std::string key, value, origin;
  };
  std::vector<Row> rows;
};

} // namespace

void sd::printRunSpec(const RunSpec &spec, llvm::raw_ostream &os) {
  SettingsTable table;
  const MeshSettings &mesh = spec.mesh;
  std::string meshValue =
      mesh.ici.empty() ? std::string("one device") : mesh.mesh.toString();
  if (!mesh.ici.empty() && mesh.ici != meshValue)
    meshValue += " (ici " + mesh.ici +
                 (mesh.dcn.empty() ? "" : ", dcn " + mesh.dcn) + ")";
  table.add("mesh", meshValue, mesh.origin);
  table.add("per_device_batch_size", spec.batch.perDevice);
  // The global batch is a row of its own only when --batch gave it.
  if (spec.batch.global.origin == "--batch")
    table.add("batch", spec.batch.global);
  // Microbatches are a row when given.
  if (spec.batch.gradAccum.source != SettingSource::Default)
    table.add("gradient_accumulation_steps", spec.batch.gradAccum);
  const Setting<LogicalAxisRules> &rules = spec.rules;
  table.add("logical_axis_rules",
            rules.source == SettingSource::Config
                ? absl::StrFormat("%d rules", rules.value.rules.size())
                : rules.value.name,
            rules.origin);
  table.add("remat_policy", spec.remat.policy);
  if (spec.remat.policy.value == RematPolicyKind::Custom) {
    table.add("names_which_can_be_saved", spec.remat.namesSaved);
    table.add("names_which_can_be_offloaded", spec.remat.namesOffloaded);
  }
  const OptimizerSettings &opt = spec.optimizer;
  const RunSettings &run = spec.run;
  table.add("max_train_steps", run.steps);
  table.add("learning_rate", opt.learningRate);
  if (opt.warmupStepsFraction)
    table.add("warmup_steps",
              absl::StrFormat("%d (warmup_steps_fraction %s × %d steps)",
                              opt.warmupSteps.value,
                              shortDouble(*opt.warmupStepsFraction),
                              run.steps.value),
              opt.warmupSteps.origin);
  else
    table.add("warmup_steps", opt.warmupSteps);
  table.add("adam_b1", opt.adamB1);
  table.add("adam_b2", opt.adamB2);
  table.add("adam_eps", opt.adamEps);
  table.add("adam_weight_decay", opt.weightDecay);
  const FineTuneSettings &tune = spec.fineTune;
  if (opt.weightDecay.value != 0)
    table.add("weight_decay_exclude", tune.weightDecayExclude);
  if (tune.lora.value) {
    table.add("enable_lora", "True", tune.lora.origin);
    table.add("lora_rank", tune.loraRank);
    table.add("lora_alpha", tune.loraAlpha);
    if (!tune.loraTargets.value.empty())
      table.add("lora_target_modules", tune.loraTargets);
    else
      table.add("lora_target_modules", tune.loraTargetRegex,
                tune.loraTargets.origin);
  }
  if (!tune.freeze.value.empty())
    table.add("freeze_parameters", tune.freeze);
  if (!tune.trainable.value.empty())
    table.add("trainable_parameters", tune.trainable);
  if (opt.lrSchedule.value != LrSchedule::Constant ||
      opt.lrSchedule.source != SettingSource::Default) {
    table.add("learning_rate_schedule", opt.lrSchedule);
    if (opt.lrScheduleSteps.value > 0)
      table.add("learning_rate_schedule_steps", opt.lrScheduleSteps);
  }
  table.add("max_grad_norm", opt.maxGradNorm);
  if (opt.maxGradValue.value > 0)
    table.add("max_grad_value", opt.maxGradValue);
  table.add("ema_decay", opt.emaDecay);
  if (opt.emaDecay.value > 0 && opt.emaWarmup.value) {
    table.add("ema_warmup", opt.emaWarmup.value ? "True" : "False",
              opt.emaWarmup.origin);
    table.add("ema_inv_gamma", opt.emaInvGamma);
    table.add("ema_power", opt.emaPower);
  }
  table.add("dataset_type", spec.data.type);
  if (spec.data.type.value == "sd")
    table.add("train_data_dir", spec.data.trainDataDir);
  table.add("class_dropout_prob", spec.data.classDropoutProb);
  if (spec.data.timestepSampling.source != SettingSource::Default) {
    table.add("timestep_sampling", spec.data.timestepSampling);
    if (spec.data.timestepSampling.value == "logit_normal") {
      table.add("logit_mean", spec.data.logitMean);
      table.add("logit_std", spec.data.logitStd);
    }
    if (spec.data.timestepSampling.value == "shift")
      table.add("flow_shift", spec.sampling.flowShift);
  }
  if (const DataSettings &data = spec.data;
      data.timestepBiasStrategy.value != "none") {
    table.add("timestep_bias_strategy", data.timestepBiasStrategy);
    table.add("timestep_bias_multiplier", data.timestepBiasMultiplier);
    if (data.timestepBiasStrategy.value == "range") {
      table.add("timestep_bias_begin", data.timestepBiasBegin);
      table.add("timestep_bias_end", data.timestepBiasEnd);
    } else {
      table.add("timestep_bias_portion", data.timestepBiasPortion);
    }
  }
  if (spec.data.snrGamma.value > 0 ||
      spec.data.snrGamma.source != SettingSource::Default)
    table.add("snr_gamma", spec.data.snrGamma);
  table.add("eval_every", spec.data.evalEvery);
  if (spec.data.predictionType)
    table.add("prediction_type", *spec.data.predictionType);
  if (spec.data.resolution)
    table.add("resolution", *spec.data.resolution);
  if (spec.data.normNumGroups)
    table.add("norm_num_groups", *spec.data.normNumGroups);
  table.add("seed", run.seed);
  table.add("output_dir", run.outputDir);
  table.add("run_name", run.runName);
  table.add("pretrained_model_name_or_path", run.pretrained);
  table.add("checkpoint_every", run.checkpointEvery);
  if (run.tracePath.source == SettingSource::Config)
    table.add("enable_profiler", "true -> " + run.tracePath.value,
              run.tracePath.origin);
  table.add("skip_first_n_steps_for_profiler", run.traceSkipSteps);
  table.add("profiler_steps", run.traceSteps);
  table.add("attention", spec.model.attention);
  if (spec.model.ulyssesShards)
    table.add("ulysses_shards", *spec.model.ulyssesShards);
  if (spec.model.flashBlockSizes)
    table.add("flash_block_sizes", *spec.model.flashBlockSizes);
  if (spec.model.attention.value != AttentionKind::DotProduct ||
      spec.model.flashMinSeqLength.source != SettingSource::Default)
    table.add("flash_min_seq_length", spec.model.flashMinSeqLength);
  table.add("weights_dtype", spec.model.weightsDtype);
  table.add("activations_dtype", spec.model.activationsDtype);
  table.add("grad_reduce_dtype", spec.model.gradReduceDtype);
  table.add("bucket_cap_mb", spec.model.bucketCapMb);

  os << "sdrun settings for " << run.modelPath;
  if (!spec.configFile.empty())
    os << " (" << spec.configFile << ")";
  os << ":\n";
  table.print(os);
  for (const std::string &note : spec.notes)
    os << note << "\n";
}
