//===- RunSpec.cpp - The typed specification of a run ---------------------===//
//
// resolveRunSpec merges the flags, a MaxDiffusion config and its key=value
// overrides setting by setting, in the order `sdrun --print-config` lists
// them (PrintRunSpec.cpp prints them), and checks each flag against its
// row of the settings table (Settings.h).
//
//===----------------------------------------------------------------------===//

#include "RunSpecResolver.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "llvm/ADT/STLExtras.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <tuple>

using namespace sd;
using namespace sd::detail;

HostInfo HostInfo::current() {
  HostInfo host;
  host.cores = std::max(1u, std::thread::hardware_concurrency());
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%d-%H%M%S", std::localtime(&now));
  host.startTime = text;
  return host;
}

std::optional<int64_t> sd::parseByteSize(std::string_view text) {
  auto isBlank = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  auto trim = [&](std::string_view s) {
    while (!s.empty() && isBlank(s.front()))
      s.remove_prefix(1);
    while (!s.empty() && isBlank(s.back()))
      s.remove_suffix(1);
    return s;
  };
  text = trim(text);
  size_t end = 0;
  while (end < text.size() &&
         ((text[end] >= '0' && text[end] <= '9') || text[end] == '.'))
    ++end;
  if (end == 0)
    return std::nullopt;
  std::string digits(text.substr(0, end));
  char *parsedEnd = nullptr;
  double number = std::strtod(digits.c_str(), &parsedEnd);
  if (parsedEnd != digits.c_str() + digits.size())
    return std::nullopt;
  std::string unit(trim(text.substr(end)));
  for (char &c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kib")
    scale = 1024.0;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "m" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "g" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "gb")
    scale = 1e9;
  else
    return std::nullopt;
  double bytes = number * scale;
  if (!(bytes > 0) || bytes > 9e18)
    return std::nullopt;
  return static_cast<int64_t>(bytes);
}

namespace {

constexpr std::string_view kRulesKey = "logical_axis_rules";

/// `data:2,fsdp:4` from the config's per-axis sizes: the axes whose ICI or
/// DCN size is not 1, in MaxDiffusion's axis order (a mesh without an axis
/// behaves like a mesh with that axis of size 1). `dcn` stays "" when every
/// DCN size is 1.
void configMesh(const RunConfig &config, std::string &ici, std::string &dcn) {
  std::vector<std::string> iciParts, dcnParts;
  bool anyDcn = false;
  for (size_t axis = 0; axis < kConfigMeshAxes.size(); ++axis) {
    int64_t i = config.ici[axis].value_or(1), d = config.dcn[axis].value_or(1);
    if (i == 1 && d == 1)
      continue;
    std::string name(kConfigMeshAxes[axis]);
    iciParts.push_back(absl::StrFormat("%s:%d", name, i));
    dcnParts.push_back(absl::StrFormat("%s:%d", name, d));
    anyDcn |= d != 1;
  }
  ici = absl::StrJoin(iciParts, ",");
  dcn = anyDcn ? absl::StrJoin(dcnParts, ",") : "";
}

} // namespace

absl::Status Resolver::resolveMesh() {
  MeshSettings &mesh = spec.mesh;
  // An empty value is a mistake (a shell variable that was not set), not a
  // request for one device, which leaving the flag out is.
  if (flags.mesh && absl::StripAsciiWhitespace(*flags.mesh).empty())
    return invalid("--mesh is empty: give the mesh's axes, e.g. "
                   "--mesh=data:2 (leave --mesh out for one device)");
  if (flags.dcnMesh && absl::StripAsciiWhitespace(*flags.dcnMesh).empty())
    return invalid("--dcn-mesh is empty: give the axes across processes, "
                   "e.g. --dcn-mesh=data:2 (leave --dcn-mesh out for one "
                   "process)");
  if (flags.dcnMesh && !flags.mesh)
    return invalid(absl::StrFormat(
        "--dcn-mesh=%s needs --mesh, the axes within a process (e.g. "
        "--mesh=data:1 for one device a process)",
        *flags.dcnMesh));
  mesh.devices = flags.devices.value_or(0);
  mesh.processes = flags.processes.value_or(0);
  if (flags.mesh || flags.dcnMesh || !hasConfig) {
    mesh.ici = flags.mesh.value_or("");
    mesh.dcn = flags.dcnMesh.value_or("");
    if (flags.mesh || flags.dcnMesh) {
      mesh.source = SettingSource::Flag;
      mesh.origin = flags.mesh ? "--mesh" : "--dcn-mesh";
    }
  } else {
    configMesh(file, mesh.ici, mesh.dcn);
    mesh.source = SettingSource::Config;
    // The first ICI key the config set names the line.
    mesh.origin = configSource("ici_data_parallelism");
    for (size_t axis = 0; axis < kConfigMeshAxes.size(); ++axis) {
      std::string key =
          absl::StrFormat("ici_%s_parallelism", kConfigMeshAxes[axis]);
      if (!file.originOf(key).empty()) {
        mesh.origin = configSource(key);
        break;
      }
    }
    // One process: a -1 DCN axis is filled with 1.
    if (!mesh.dcn.empty() && !flags.processes)
      mesh.processes = 1;
  }
  // A -1 axis, from --mesh or the config's ici_* keys, is filled with the
  // cores unless --devices gives the count.
  if (!flags.devices &&
      llvm::any_of(absl::StrSplit(mesh.ici, ','), [](absl::string_view axis) {
        return absl::StripAsciiWhitespace(axis.substr(axis.find(':') + 1)) ==
               "-1";
      })) {
    mesh.devices = host.cores;
    spec.notes.push_back(absl::StrFormat(
        "mesh: the -1 axis is filled with %d devices (one per core; "
        "--devices=N sets another count)",
        host.cores));
  }
  mesh.mesh = MeshSpec({MeshAxis{"data", 1, 1}});
  if (!mesh.ici.empty()) {
    MeshOptions options;
    if (mesh.devices > 0)
      options.devices = mesh.devices;
    if (mesh.processes > 0)
      options.processes = mesh.processes;
    options.processesFromMpi = flags.processesFromMpi;
    absl::StatusOr<MeshSpec> parsed = parseMesh(mesh.ici, mesh.dcn, options);
    if (!parsed.ok())
      return parsed.status();
    mesh.mesh = *std::move(parsed);
  }
  // parseMesh checks a mesh it parses; without one the run is data:1 in one
  // process.
  if (mesh.ici.empty() && flags.processes && *flags.processes != 1)
    return invalid(absl::StrFormat(
        "no mesh is given, which runs one device in one process, but %s "
        "(give the mesh with --mesh and --dcn-mesh, or the config's ici_* "
        "and dcn_* keys)",
        flags.processesFromMpi
            ? absl::StrFormat("mpirun started %d", *flags.processes)
            : absl::StrFormat("--processes=%d", *flags.processes)));
  if (flags.devices && *flags.devices != mesh.mesh.numDevices())
    return invalid(absl::StrFormat("mesh %s has %d devices, but --devices=%d",
                                   mesh.mesh.toString(), mesh.mesh.numDevices(),
                                   *flags.devices));
  return absl::OkStatus();
}

absl::Status Resolver::resolveBatch() {
  BatchSettings &batch = spec.batch;
  batch.perDevice = pick(&F::perDeviceBatch, &C::perDeviceBatchSize, 0.0);
  // Microbatches per optimizer step: per_device_batch_size is a
  // microbatch's (MaxText's global batch = per device × devices × steps).
  batch.gradAccum =
      pick(&F::gradAccum, &C::gradientAccumulationSteps, int64_t(1));
  int64_t accum = batch.gradAccum.value;
  if (flags.batch && flags.perDeviceBatch)
    return invalid("give --batch or --per-device-batch, not both");
  if (flags.batch) {
    batch.global = pick(&F::batch, 0);
  } else if (batch.perDevice.value != 0.0) {
    double perDevice = batch.perDevice.value;
    int64_t devices = spec.mesh.mesh.numDevices();
    double global =
        perDevice * static_cast<double>(devices) * static_cast<double>(accum);
    std::string product = absl::StrFormat(
        "%s=%s × %d devices%s = %s",
        flags.perDeviceBatch ? "--per-device-batch" : "per_device_batch_size",
        shortDouble(perDevice), devices,
        accum > 1 ? absl::StrFormat(" × %d microbatches", accum) : "",
        shortDouble(global));
    // Checked before the conversion, which is undefined past int64_t.
    if (global > static_cast<double>(kMaxGlobalBatch))
      return invalid(absl::StrFormat("%s is above the largest global batch, %d",
                                     product, kMaxGlobalBatch));
    if (!(global >= 1.0) || std::fabs(global - std::round(global)) > 1e-9)
      return invalid(
          absl::StrFormat("%s is not a whole, positive global batch", product));
    batch.global.value = static_cast<int64_t>(std::llround(global));
    batch.global.source = batch.perDevice.source;
    batch.global.origin = batch.perDevice.origin;
  }
  // Without a batch, a microbatch is the model's default batch.
  if (batch.global.value % accum != 0)
    return invalid(absl::StrFormat(
        "global batch %d (%s) does not split into %d microbatches (%s)",
        batch.global.value, batch.global.origin, accum,
        batch.gradAccum.origin));
  return absl::OkStatus();
}

absl::Status Resolver::resolveRules() {
  if (flags.rules || !file.rules) {
    Setting<std::string> name = pick(&F::rules, std::string("dit"));
    absl::StatusOr<LogicalAxisRules> rules = loadRules(name.value);
    if (!rules.ok())
      return rules.status();
    spec.rules.value = *std::move(rules);
    spec.rules.source = name.source;
    spec.rules.origin = name.origin;
    return absl::OkStatus();
  }
  spec.rules.value = *file.rules;
  spec.rules.source = SettingSource::Config;
  // Rules a key=value argument gave have no line to point at.
  spec.rules.origin = file.originOf(kRulesKey) == "command line"
                          ? "logical_axis_rules=..."
                          : configSource(kRulesKey);
  return absl::OkStatus();
}

absl::Status Resolver::resolveOutputs() {
  RunSettings &run = spec.run;
  run.outputDir = pick(&F::outputDir, &C::outputDir, std::string());
  run.runName = pick(&F::runName, &C::runName, std::string());
  run.effectiveRunName = run.runName.value;
  // The run's directory is output_dir/run_name: a name that climbs out of
  // output_dir (or is absolute) would write elsewhere.
  const std::string &name = run.runName.value;
  if (name.find('/') != std::string::npos || name == "." || name == "..")
    return invalid(absl::StrFormat(
        "%s: run_name '%s' must be a plain name (no '/', not '.' or '..'): "
        "the run writes to output_dir/run_name",
        run.runName.origin, name));
  if (!run.outputDir.value.empty()) {
    if (run.effectiveRunName.empty())
      run.effectiveRunName = host.startTime;
    run.runDir = run.outputDir.value + "/" + run.effectiveRunName;
  }
  run.checkpointEvery =
      pick(&F::checkpointEvery, &C::checkpointEvery, int64_t(0));
  run.checkpointDir = flags.checkpointDir.value_or("");
  run.resume = flags.resume.value_or(false);
  run.initFrom = flags.initFrom.value_or("");
  run.pretrained = pick(&F::pretrained, &C::pretrained, std::string());
  run.allowMissing = flags.allowMissing.value_or(false);
  run.exportPath = flags.exportPath.value_or("");
  run.exportEmaPath = flags.exportEmaPath.value_or("");
  run.exportMergedPath = flags.exportMergedPath.value_or("");
  if (flags.exportDtype) {
    run.exportDtype = parseDType(*flags.exportDtype);
    if (!run.exportDtype)
      return invalid(absl::StrFormat(
          "--export-dtype: dtype '%s' is not one sd exports; expected "
          "float32 or bfloat16",
          *flags.exportDtype));
  }
  run.metricsPath = flags.metricsPath.value_or("");
  run.verify = flags.verify.value_or(false);
  run.allowNonfiniteLoss = flags.allowNonfiniteLoss.value_or(false);
  run.cacheDir = flags.cacheDir.value_or("");
  return absl::OkStatus();
}

absl::Status Resolver::resolveTrace() {
  RunSettings &run = spec.run;
  run.tracePath = pick(&F::tracePath, std::string());
  if (!flags.tracePath && file.enableProfiler.value_or(false)) {
    // MaxDiffusion's enable_profiler: the trace goes beside the metrics.
    run.tracePath.value = run.runDir.empty() ? std::string("trace.json")
                                             : run.runDir + "/trace.json";
    run.tracePath.source = SettingSource::Config;
    run.tracePath.origin = configSource("enable_profiler");
  }
  run.traceSkipSteps =
      pick(&F::traceSkipSteps, &C::skipFirstNStepsForProfiler, int64_t(0));
  run.traceSteps = pick(&F::traceSteps, &C::profilerSteps, int64_t(10));
  int64_t every = run.checkpointEvery.value;
  if (hasConfig && every > 0 && run.checkpointDir.empty() &&
      !flags.checkpointEvery)
    spec.notes.push_back(absl::StrFormat(
        "checkpoint_every: %d needs --checkpoint-dir to write checkpoints",
        every));
  return absl::OkStatus();
}

absl::Status Resolver::resolveModel() {
  ModelSettings &model = spec.model;
  Setting<std::string> attention =
      pick(&F::attention, &C::attention, std::string("dot_product"));
  std::optional<AttentionKind> kind = parseAttentionKind(attention.value);
  if (!kind) {
    bool unavailable =
        std::find(kUnavailableAttentionKinds.begin(),
                  kUnavailableAttentionKinds.end(),
                  attention.value) != kUnavailableAttentionKinds.end();
    return invalid(absl::StrFormat(
        "%s: attention '%s' %s; sd runs dot_product, flash, ring, ulysses, "
        "ulysses_ring and auto",
        attention.origin, attention.value,
        unavailable ? "is not available in sd" : "is unknown"));
  }
  model.attention.value = *kind;
  model.attention.source = attention.source;
  model.attention.origin = attention.origin;
  // A config's ulysses_shards is MaxDiffusion's -1 when unset, and a
  // config may keep one for another attention; the flag must fit.
  // A plain count (GCC 12 warns that an optional passed to pick may be
  // read uninitialized).
  int64_t fileShards = file.ulyssesShards.value_or(0);
  if (fileShards < 1)
    fileShards = 0;
  bool takesShards =
      *kind == AttentionKind::UlyssesRing || *kind == AttentionKind::Auto;
  if (flags.ulyssesShards && !takesShards)
    return invalid(absl::StrFormat(
        "--ulysses-shards: ulysses_shards %d is for attention ulysses_ring "
        "(or auto), not %s",
        *flags.ulyssesShards, attention.value));
  if (fileShards && !flags.ulyssesShards && !takesShards) {
    spec.notes.push_back(
        absl::StrFormat("ulysses_shards: %d (unused: attention is %s)",
                        fileShards, attention.value));
  } else if (flags.ulyssesShards) {
    model.ulyssesShards = pick(&F::ulyssesShards, int64_t(0));
  } else if (fileShards) {
    Setting<int64_t> shards(fileShards);
    shards.source = SettingSource::Config;
    shards.origin = configSource("ulysses_shards");
    model.ulyssesShards = shards;
  } else if (*kind == AttentionKind::UlyssesRing) {
    return invalid(absl::StrFormat(
        "%s: attention ulysses_ring needs ulysses_shards (--ulysses-shards), "
        "the devices per Ulysses group",
        attention.origin));
  }
  std::optional<FlashBlockSizes> flagSizes;
  if (flags.flashBlockSizes) {
    // The flag takes what the config key takes: MaxDiffusion's JSON.
    RunConfig parsed;
    if (absl::Status s = applyOverride(parsed, "flash_block_sizes=" +
                                                   *flags.flashBlockSizes);
        !s.ok()) {
      // The override's message names the key and its origin; the flag's
      // names the flag.
      absl::string_view message = s.message();
      absl::ConsumePrefix(&message, "command line: ");
      absl::ConsumePrefix(&message, "flash_block_sizes: ");
      return invalid("--flash-block-sizes: " + std::string(message));
    }
    flagSizes = parsed.flashBlockSizes;
  }
  model.flashMinSeqLength =
      pick(&F::flashMinSeqLength, &C::flashMinSeqLength, int64_t(0));
  if (model.flashMinSeqLength.value > 0 && *kind == AttentionKind::DotProduct)
    spec.notes.push_back(absl::StrFormat(
        "flash_min_seq_length: %d (unused: attention is dot_product)",
        model.flashMinSeqLength.value));
  if (flagSizes || file.flashBlockSizes) {
    model.flashBlockSizes =
        pick(flagSizes, "flash-block-sizes", "flash_block_sizes",
             file.flashBlockSizes, FlashBlockSizes());
    if (*kind == AttentionKind::DotProduct)
      spec.notes.push_back(
          "flash_block_sizes: " + model.flashBlockSizes->value.toString() +
          " (unused: attention is dot_product)");
  }
  for (auto [flag, key, setting] :
       {std::tuple{&F::weightsDtype, &C::weightsDtype, &model.weightsDtype},
        std::tuple{&F::activationsDtype, &C::activationsDtype,
                   &model.activationsDtype},
        std::tuple{&F::gradReduceDtype, &C::gradReduceDtype,
                   &model.gradReduceDtype}}) {
    Setting<std::string> name = pick(flag, key, std::string("float32"));
    std::optional<DType> type = parseDType(name.value);
    if (!type)
      return invalid(absl::StrFormat(
          "%s: dtype '%s' is not one sd computes in; expected float32 or "
          "bfloat16",
          name.origin, name.value));
    *setting = parsedSetting(name, *type);
  }
  model.bucketCapMb = pick(&F::bucketCapMb, &C::bucketCapMb, 0.0);
  return absl::OkStatus();
}

absl::Status Resolver::resolveBudgets() {
  absl::StatusOr<NetworkModel> network = resolveNetwork(flags);
  if (!network.ok())
    return network.status();
  spec.mesh.network = *network;
  RunSettings &run = spec.run;
  for (auto [flag, flagName, budget] :
       {std::tuple{&flags.deviceMemory, "device-memory",
                   &run.deviceMemoryBudget},
        std::tuple{&flags.hostMemory, "host-memory", &run.hostMemoryBudget},
        std::tuple{&flags.hostMemoryLimit, "host-memory-limit",
                   &run.processMemoryLimit}}) {
    if (!*flag)
      continue;
    std::optional<int64_t> size = parseByteSize(**flag);
    if (!size)
      return invalid(absl::StrFormat(
          "--%s='%s' is not a size (e.g. 512MiB, 2GB)", flagName, **flag));
    // 0 would mean "unlimited", which leaving the flag out says.
    if (*size < 1)
      return invalid(absl::StrFormat(
          "--%s='%s' must be at least 1 byte (leave it out for no limit)",
          flagName, **flag));
    *budget = *size;
  }
  run.threadsPerDevice = static_cast<int>(flags.threadsPerDevice.value_or(0));
  run.collectiveTimeout = flags.collectiveTimeout;
  return absl::OkStatus();
}

/// The checks between sdrun's run flags, made here so that --print-config
/// refuses what the run would.
absl::Status Resolver::checkRunFlags() {
  const RunSettings &run = spec.run;
  if (!run.exportEmaPath.empty() && !(spec.optimizer.emaDecay.value > 0))
    return invalid("--export-ema needs the step to keep EMA weights: give "
                   "ema_decay (--ema-decay)");
  if (!run.exportMergedPath.empty() && !spec.fineTune.lora.value)
    return invalid("--export-merged merges LoRA adapters into their base "
                   "weights: it needs LoRA (enable_lora, --lora-rank); "
                   "--export writes the model");
  if (run.resume && run.checkpointDir.empty())
    return invalid("--resume needs --checkpoint-dir");
  // A fine-tune resumes its trained tensors from the checkpoint and reads
  // the frozen ones, which checkpoints do not hold, from --init-from.
  const FineTuneSettings &tune = spec.fineTune;
  bool freezes = tune.lora.value || !tune.freeze.value.empty() ||
                 !tune.trainable.value.empty();
  if (run.resume && !run.initFrom.empty() && !freezes)
    return invalid("give --resume or --init-from, not both (a fine-tune "
                   "with frozen parameters takes both: --init-from gives "
                   "the frozen ones)");
  const Setting<std::string> &pretrained = run.pretrained;
  if (!pretrained.value.empty() && !run.initFrom.empty())
    return invalid(absl::StrFormat(
        "%s: pretrained_model_name_or_path '%s' and --init-from both give "
        "the starting weights; give one (pretrained_model_name_or_path='' "
        "keeps --init-from's)",
        pretrained.origin, pretrained.value));
  if (!pretrained.value.empty() && run.resume)
    return invalid(absl::StrFormat(
        "%s: pretrained_model_name_or_path '%s' starts a run; --resume "
        "continues one from its checkpoint (pretrained_model_name_or_path='' "
        "to resume)",
        pretrained.origin, pretrained.value));
  if (!pretrained.value.empty())
    if (absl::Status status =
            checkPretrainedPath(pretrained.value, pretrained.origin);
        !status.ok())
      return status;
  if (run.allowMissing && run.initFrom.empty() && pretrained.value.empty())
    return invalid("--allow-missing applies to --init-from's file; give "
                   "--init-from=FILE.safetensors");
  return absl::OkStatus();
}

/// One warning for each place the keys sd does not use came from: the
/// file, the command line.
void Resolver::warnIgnoredKeys() {
  std::vector<std::pair<std::string, std::vector<std::string>>> bySource;
  for (const std::string &key : file.ignoredKeys) {
    std::string source = file.originOf(key) == "command line"
                             ? "command line"
                             : llvm::sys::path::filename(file.fileName).str();
    auto it = llvm::find_if(
        bySource, [&](const auto &group) { return group.first == source; });
    if (it == bySource.end())
      it = bySource.insert(it, {source, {}});
    it->second.push_back(key);
  }
  for (const auto &[source, keys] : bySource)
    spec.warnings.push_back(absl::StrFormat(
        "%s: ignoring %d %s sd does not use: %s", source, keys.size(),
        keys.size() == 1 ? "key" : "keys", absl::StrJoin(keys, ", ")));
}

absl::StatusOr<RunSpec> Resolver::resolve() {
  if (absl::Status s = checkFlagValues(flags); !s.ok())
    return s;
  spec.configFile = hasConfig ? file.fileName : "";
  spec.run.modelPath = flags.modelPath;
  warnIgnoredKeys();
  // In the order the settings are listed, so the notes come in that order.
  for (absl::Status (Resolver::*step)() :
       {&Resolver::resolveMesh, &Resolver::resolveBatch,
        &Resolver::resolveRules, &Resolver::resolveRemat,
        &Resolver::resolveOptimizer, &Resolver::resolveFineTune,
        &Resolver::resolveOutputs, &Resolver::resolveTrace})
    if (absl::Status s = (this->*step)(); !s.ok())
      return s;
  if (absl::Status s = resolveModel(); !s.ok())
    return s;
  if (absl::Status s = resolveData(); !s.ok())
    return s;
  if (absl::Status s = resolveBudgets(); !s.ok())
    return s;
  if (absl::Status s = checkRunFlags(); !s.ok())
    return s;
  return std::move(spec);
}

bool sd::isConfigFileArgument(std::string_view argument) {
  llvm::StringRef text(argument.data(), argument.size());
  return !text.contains('=') &&
         (text.ends_with(".yml") || text.ends_with(".yaml"));
}

absl::StatusOr<RunSpec> sd::resolveRunSpec(const RunSpecFlags &flags,
                                           const HostInfo &host) {
  // MaxDiffusion's habit, `train.py base_xl.yml key=value`: a config file
  // among the arguments is read as --config's.
  std::optional<std::string> configPath = flags.config;
  std::vector<std::string> overrides;
  for (const std::string &argument : flags.overrides) {
    if (!isConfigFileArgument(argument)) {
      overrides.push_back(argument);
      continue;
    }
    if (configPath)
      return invalid(absl::StrFormat(
          "'%s': a second config file, after %s'%s'; give one", argument,
          flags.config ? "--config=" : "", *configPath));
    configPath = argument;
  }
  if (!overrides.empty() && !flags.takesOverrides)
    return invalid(absl::StrFormat(
        "'%s': only sdrun takes key=value arguments; set the key in the "
        "config file, or give its flag",
        overrides.front()));
  RunConfig file;
  if (configPath) {
    absl::StatusOr<RunConfig> loaded = loadRunConfig(*configPath);
    if (!loaded.ok())
      return loaded.status();
    file = *std::move(loaded);
    if (absl::Status s = applyOverrides(file, overrides); !s.ok())
      return s;
  } else if (!overrides.empty()) {
    return invalid(absl::StrFormat(
        "'%s': key=value arguments override a config file (--config=FILE.yml, "
        "or FILE.yml after the model)",
        overrides.front()));
  }
  return Resolver(flags, file, configPath.has_value(), host).resolve();
}

absl::StatusOr<std::optional<HardwareProfile>>
sd::resolveProfile(const RunSpecFlags &flags) {
  if (!flags.profile)
    return std::optional<HardwareProfile>();
  absl::StatusOr<HardwareProfile> profile =
      loadProfile(*flags.profile, "profile");
  if (!profile.ok())
    return profile.status();
  return std::optional<HardwareProfile>(*std::move(profile));
}

absl::StatusOr<NetworkModel> sd::resolveNetwork(const RunSpecFlags &flags) {
  absl::StatusOr<std::optional<HardwareProfile>> profile =
      resolveProfile(flags);
  if (!profile.ok())
    return profile.status();
  NetworkModel network = *profile ? (*profile)->network : NetworkModel();
  for (auto [text, name, field] :
       {std::tuple{&flags.iciBandwidth, "ici-bandwidth", &network.iciBandwidth},
        std::tuple{&flags.dcnBandwidth, "dcn-bandwidth",
                   &network.dcnBandwidth}}) {
    if (!*text)
      continue;
    absl::StatusOr<double> value = parseBandwidth(**text, name);
    if (!value.ok())
      return value.status();
    *field = *value;
  }
  for (auto [text, name, field] :
       {std::tuple{&flags.iciLatency, "ici-latency", &network.iciLatency},
        std::tuple{&flags.dcnLatency, "dcn-latency", &network.dcnLatency}}) {
    if (!*text)
      continue;
    absl::StatusOr<double> value = parseLatency(**text, name);
    if (!value.ok())
      return value.status();
    *field = *value;
  }
  return network;
}

absl::Status sd::checkPretrainedPath(const std::string &path,
                                     const std::string &origin) {
  std::string where = origin.empty() ? "" : origin + ": ";
  namespace fs = llvm::sys::fs;
  if (fs::is_directory(path))
    return absl::OkStatus();
  if (fs::exists(path))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%spretrained_model_name_or_path '%s' is not a directory (a diffusers "
        "model folder; a single safetensors file goes to --init-from)",
        where, path));
  // A hub id: `org/name`, each part of the characters hub ids use.
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  bool hubId =
      parts.size() == 2 && llvm::all_of(parts, [](const std::string &p) {
        return !p.empty() && p != "." && p != ".." &&
               llvm::all_of(p, [](char c) {
                 return std::isalnum(static_cast<unsigned char>(c)) ||
                        c == '-' || c == '_' || c == '.';
               });
      });
  if (hubId)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%spretrained_model_name_or_path '%s' is a Hugging Face hub id; sd "
        "reads local folders only (it downloads nothing): download it first "
        "(huggingface-cli download %s --local-dir DIR) and give DIR",
        where, path, path));
  return absl::InvalidArgumentError(absl::StrFormat(
      "%spretrained_model_name_or_path '%s' does not exist", where, path));
}
