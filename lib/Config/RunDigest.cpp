//===- RunDigest.cpp - What the ranks of a run must agree on --------------===//
//
// The entries are listed in the order `sdrun --print-config` shows the
// settings, so that the first difference is the one users read first.
// Values are exact (no rounding of doubles), since ranks whose learning
// rates differ in the last bit still train different models.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunDigest.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace sd;

std::string sd::digestValue(int64_t value) { return std::to_string(value); }

std::string sd::digestValue(double value) {
  // The fewest %g digits that read back as `value`.
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

std::string sd::digestValue(bool value) { return value ? "true" : "false"; }

std::string sd::digestQuoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

namespace {

/// Entries in the order they are added.
class DigestBuilder {
public:
  void add(std::string name, std::string value, std::string shown = "") {
    digest.push_back({std::move(name), std::move(value), std::move(shown)});
  }
  void add(std::string name, int64_t value) {
    add(std::move(name), digestValue(value));
  }
  void add(std::string name, double value) {
    add(std::move(name), digestValue(value));
  }
  void add(std::string name, bool value) {
    add(std::move(name), digestValue(value));
  }
  /// A path or name, quoted; `none` when empty.
  void addText(std::string name, std::string_view text) {
    add(std::move(name), text.empty() ? "none" : digestQuoted(text));
  }

  RunDigest digest;
};

/// The mesh's ICI sizes ("data:1,fsdp:2") and DCN sizes ("data:2"; "none"
/// within one process), axis by axis in the mesh's order.
std::pair<std::string, std::string> meshSizes(const MeshSpec &mesh) {
  std::vector<std::string> ici, dcn;
  for (const MeshAxis &axis : mesh.axes()) {
    ici.push_back(absl::StrCat(axis.name, ":", axis.ici));
    if (axis.dcn != 1)
      dcn.push_back(absl::StrCat(axis.name, ":", axis.dcn));
  }
  return {absl::StrJoin(ici, ","),
          dcn.empty() ? std::string("none") : absl::StrJoin(dcn, ",")};
}

/// Every rule, in order: "batch:data,fsdp;embed:fsdp;heads:".
std::string rulesText(const LogicalAxisRules &rules) {
  std::vector<std::string> parts;
  for (const LogicalAxisRule &rule : rules.rules)
    parts.push_back(
        absl::StrCat(rule.logicalName, ":", absl::StrJoin(rule.meshAxes, ",")));
  return absl::StrJoin(parts, ";");
}

std::string namesText(const std::vector<std::string> &names) {
  return names.empty() ? std::string("none") : absl::StrJoin(names, ",");
}

} // namespace

RunDigest sd::runSpecDigest(const RunSpec &spec, DigestScope scope) {
  DigestBuilder d;
  auto [ici, dcn] = meshSizes(spec.mesh.mesh);
  d.add("mesh", ici);
  d.add("dcn_mesh", dcn);
  const NetworkModel &network = spec.mesh.network;
  d.add("ici_bandwidth", network.iciBandwidth);
  d.add("dcn_bandwidth", network.dcnBandwidth);
  d.add("ici_latency", network.iciLatency);
  d.add("dcn_latency", network.dcnLatency);
  // Rules loaded from files of the same name may differ: compared rule by
  // rule, shown by name.
  d.add("logical_axis_rules", rulesText(spec.rules.value),
        digestQuoted(spec.rules.value.name));
  d.add("batch", spec.batch.global.value);
  const ModelSettings &model = spec.model;
  d.add("attention", std::string(attentionKindName(model.attention.value)));
  d.add("ulysses_shards", model.ulyssesShards
                              ? digestValue(model.ulyssesShards->value)
                              : std::string("none"));
  d.add("flash_block_sizes", model.flashBlockSizes
                                 ? model.flashBlockSizes->value.toString()
                                 : std::string("none"));
  d.add("flash_min_seq_length", model.flashMinSeqLength.value);
  if (scope == DigestScope::Sampling)
    return std::move(d.digest);

  const RunSettings &run = spec.run;
  const OptimizerSettings &opt = spec.optimizer;
  d.add("grad_accum", spec.batch.gradAccum.value);
  // The buckets reorder the gradients' collectives: ranks must agree.
  d.add("bucket_cap_mb", spec.model.bucketCapMb.value);
  d.add("remat_policy", std::string(rematPolicyName(spec.remat.policy.value)));
  d.add("names_which_can_be_saved", namesText(spec.remat.namesSaved.value));
  d.add("names_which_can_be_offloaded",
        namesText(spec.remat.namesOffloaded.value));
  d.add("max_train_steps", run.steps.value);
  d.add("learning_rate", opt.learningRate.value);
  d.add("warmup_steps", opt.warmupSteps.value);
  d.add("adam_b1", opt.adamB1.value);
  d.add("adam_b2", opt.adamB2.value);
  d.add("adam_eps", opt.adamEps.value);
  d.add("adam_weight_decay", opt.weightDecay.value);
  d.add("max_grad_norm", opt.maxGradNorm.value);
  d.add("max_grad_value", opt.maxGradValue.value);
  d.add("learning_rate_schedule",
        std::string(lrScheduleName(opt.lrSchedule.value)));
  d.add("learning_rate_schedule_steps", opt.lrScheduleSteps.value);
  d.add("ema_decay", opt.emaDecay.value);
  d.add("ema_warmup", opt.emaWarmup.value);
  d.add("ema_inv_gamma", opt.emaInvGamma.value);
  d.add("ema_power", opt.emaPower.value);
  const FineTuneSettings &tune = spec.fineTune;
  d.add("enable_lora", tune.lora.value);
  d.add("lora_rank", tune.loraRank.value);
  d.add("lora_alpha", tune.loraAlpha.value);
  d.add("lora_target_modules", namesText(tune.loraTargets.value));
  d.addText("lora_target_regex", tune.loraTargetRegex);
  d.add("freeze_parameters", namesText(tune.freeze.value));
  d.add("trainable_parameters", namesText(tune.trainable.value));
  d.add("weight_decay_exclude", namesText(tune.weightDecayExclude.value));
  const DataSettings &data = spec.data;
  d.add("dataset_type", data.type.value);
  d.addText("train_data_dir", data.trainDataDir.value);
  d.add("class_dropout_prob", data.classDropoutProb.value);
  d.add("timestep_sampling", data.timestepSampling.value);
  d.add("logit_mean", data.logitMean.value);
  d.add("logit_std", data.logitStd.value);
  d.add("timestep_bias_strategy", data.timestepBiasStrategy.value);
  d.add("timestep_bias_multiplier", data.timestepBiasMultiplier.value);
  d.add("timestep_bias_portion", data.timestepBiasPortion.value);
  d.add("timestep_bias_begin", data.timestepBiasBegin.value);
  d.add("timestep_bias_end", data.timestepBiasEnd.value);
  // -1 and 0 both mean the plain loss.
  d.add("snr_gamma", std::max(data.snrGamma.value, 0.0));
  // -1 and 0 both mean never, as they do for checkpoint_every.
  d.add("eval_every", std::max<int64_t>(data.evalEvery.value, 0));
  d.add("prediction_type",
        data.predictionType ? data.predictionType->value : std::string("none"));
  d.add("seed", std::to_string(run.seed.value));
  d.addText("checkpoint_dir", run.checkpointDir);
  d.add("checkpoint_every", std::max<int64_t>(run.checkpointEvery.value, 0));
  d.add("resume", run.resume);
  d.addText("init_from", run.initFrom);
  d.addText("pretrained", run.pretrained.value);
  // Rank 0 writes the exports, but every rank takes part in their gathers
  // (as in --verify's): whether there is one must agree, not its path.
  d.add("export", !run.exportPath.empty());
  d.add("export_ema", !run.exportEmaPath.empty());
  d.add("export_merged", !run.exportMergedPath.empty());
  d.add("verify", run.verify);
  // One rank stopping at a NaN loss while another goes on would leave it
  // waiting in the next collective.
  d.add("allow_nonfinite_loss", run.allowNonfiniteLoss);
  return std::move(d.digest);
}

// Each field as its length, ':' and its bytes.
std::string sd::encodeDigest(const RunDigest &digest) {
  std::string bytes;
  for (const DigestEntry &entry : digest)
    for (const std::string *field : {&entry.name, &entry.value, &entry.shown})
      absl::StrAppend(&bytes, field->size(), ":", *field);
  return bytes;
}

absl::StatusOr<RunDigest> sd::decodeDigest(std::string_view bytes) {
  auto field = [&](std::string &out) {
    size_t colon = bytes.find(':');
    size_t length = 0;
    if (colon == std::string_view::npos ||
        !absl::SimpleAtoi(absl::string_view(bytes.data(), colon), &length) ||
        length > bytes.size() - colon - 1)
      return false;
    out = std::string(bytes.substr(colon + 1, length));
    bytes.remove_prefix(colon + 1 + length);
    return true;
  };
  RunDigest digest;
  while (!bytes.empty()) {
    DigestEntry entry;
    if (!field(entry.name) || !field(entry.value) || !field(entry.shown))
      return absl::InvalidArgumentError(absl::StrCat(
          "malformed run digest after ", digest.size(), " entries"));
    digest.push_back(std::move(entry));
  }
  return digest;
}

namespace {
std::string shown(const DigestEntry &entry) {
  return entry.shown.empty() ? entry.value : entry.shown;
}

const DigestEntry *find(const RunDigest &digest, std::string_view name) {
  auto found =
      std::find_if(digest.begin(), digest.end(), [&](const DigestEntry &entry) {
        return entry.name == name;
      });
  return found == digest.end() ? nullptr : &*found;
}
} // namespace

std::optional<std::string> sd::firstDifference(const RunDigest &reference,
                                               int referenceRank,
                                               const RunDigest &other,
                                               int otherRank) {
  for (const DigestEntry &mine : reference) {
    const DigestEntry *theirs = find(other, mine.name);
    if (!theirs)
      return absl::StrCat("rank ", otherRank, " has no ", mine.name, ", rank ",
                          referenceRank, "'s is ", shown(mine));
    if (theirs->value == mine.value)
      continue;
    if (shown(*theirs) == shown(mine))
      return absl::StrCat("rank ", otherRank, "'s ", mine.name, " ",
                          shown(mine), " differs from rank ", referenceRank,
                          "'s");
    return absl::StrCat("rank ", otherRank, "'s ", mine.name, " is ",
                        shown(*theirs), ", rank ", referenceRank, "'s is ",
                        shown(mine));
  }
  for (const DigestEntry &theirs : other)
    if (!find(reference, theirs.name))
      return absl::StrCat("rank ", otherRank, "'s ", theirs.name, " is ",
                          shown(theirs), ", rank ", referenceRank, " has none");
  return std::nullopt;
}

std::optional<std::string>
sd::firstDisagreement(const std::vector<RunDigest> &digests) {
  for (size_t rank = 1; rank < digests.size(); ++rank)
    if (std::optional<std::string> difference = firstDifference(
            digests[0], 0, digests[rank], static_cast<int>(rank)))
      return difference;
  return std::nullopt;
}
