//===- sdrun.cpp - Runs training steps of an sd model on a device mesh ----===//
//
//   sdrun MODEL.mlir --mesh=data:2 --batch=8 --steps=20 [--verify]
//   sdrun MODEL.mlir --config=run.yml [key=value ...] [--checkpoint-dir=DIR
//         [--resume]] [--trace=FILE.json]
//
// Resolves the flags and a MaxDiffusion-style config file (flags and
// key=value arguments override the file) into TrainRunOptions and hands
// them to mlir::sd::runTraining (sd/Driver/TrainRun.h). See the README.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunConfig.h"
#include "sd/Driver/TrainRun.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Passes/Passes.h"
#include "sd/Runtime/Runtime.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <thread>

using namespace llvm;

static cl::OptionCategory runCategory("sdrun options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"));
static cl::list<std::string>
    overrideArgs(cl::Positional, cl::ZeroOrMore,
                 cl::desc("[key=value ...] (override --config's keys)"));
static cl::opt<std::string>
    configFlag("config",
               cl::desc("A MaxDiffusion-style YAML config (ici_*/dcn_* "
                        "parallelism, per_device_batch_size, remat_policy, "
                        "learning_rate, adam_*, max_train_steps, ...)"),
               cl::value_desc("file.yml"), cl::cat(runCategory));
static cl::opt<bool> printConfigFlag(
    "print-config",
    cl::desc("Print the resolved run settings, where each came from, and exit"),
    cl::init(false), cl::cat(runCategory));
static cl::opt<std::string>
    meshFlag("mesh",
             cl::desc("Device mesh, e.g. data:2,fsdp:2 (default: one device)"),
             cl::cat(runCategory));
static cl::opt<int64_t>
    devicesFlag("devices", cl::desc("Device count (fills a -1 mesh axis)"),
                cl::init(0), cl::cat(runCategory));
static cl::opt<std::string>
    rulesFlag("rules",
              cl::desc("Logical axis rules: dit (default), sdxl, flux, wan, "
                       "or a MaxDiffusion YAML file"),
              cl::init("dit"), cl::cat(runCategory));
static cl::opt<int64_t> stepsFlag("steps",
                                  cl::desc("Steps the run ends at "
                                           "(max_train_steps; default 10)"),
                                  cl::init(10), cl::cat(runCategory));
static cl::opt<int64_t>
    batchFlag("batch", cl::desc("Global batch (default: the model's)"),
              cl::init(0), cl::cat(runCategory));
static cl::opt<double> perDeviceBatchFlag(
    "per-device-batch",
    cl::desc("MaxDiffusion's per_device_batch_size (may be fractional)"),
    cl::init(0.0), cl::cat(runCategory));
static cl::opt<uint64_t>
    seedFlag("seed", cl::desc("Seed of the parameters and the batch"),
             cl::init(0), cl::cat(runCategory));
static cl::opt<double> lrFlag("lr", cl::desc("Peak learning rate"),
                              cl::init(1e-4), cl::cat(runCategory));
static cl::opt<int64_t> warmupFlag("warmup-steps",
                                   cl::desc("Linear warm-up steps"),
                                   cl::init(0), cl::cat(runCategory));
static cl::opt<double> adamB1Flag("adam-b1", cl::desc("AdamW beta1"),
                                  cl::init(0.9), cl::cat(runCategory));
static cl::opt<double> adamB2Flag("adam-b2", cl::desc("AdamW beta2"),
                                  cl::init(0.999), cl::cat(runCategory));
static cl::opt<double> adamEpsFlag("adam-eps", cl::desc("AdamW epsilon"),
                                   cl::init(1e-8), cl::cat(runCategory));
static cl::opt<double>
    weightDecayFlag("adam-weight-decay",
                    cl::desc("AdamW decoupled weight decay"), cl::init(1e-2),
                    cl::cat(runCategory));
static cl::opt<double> maxGradNormFlag(
    "max-grad-norm",
    cl::desc("Clip gradients to this global norm (0: no clipping)"),
    cl::init(0.0), cl::cat(runCategory));
static cl::opt<std::string>
    rematFlag("remat",
              cl::desc("Remat policy: NONE (default), FULL, "
                       "MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, "
                       "HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM"),
              cl::init("NONE"), cl::cat(runCategory));
static cl::list<std::string> namesSavedFlag(
    "names-saved", cl::CommaSeparated,
    cl::desc("CUSTOM: names_which_can_be_saved"), cl::cat(runCategory));
static cl::list<std::string> namesOffloadedFlag(
    "names-offloaded", cl::CommaSeparated,
    cl::desc("CUSTOM: names_which_can_be_offloaded"), cl::cat(runCategory));
static cl::opt<std::string>
    metricsFlag("metrics",
                cl::desc("Write one JSON object per step to this file"),
                cl::value_desc("file.jsonl"), cl::cat(runCategory));
static cl::opt<bool> verifyFlag(
    "verify",
    cl::desc("Also run the steps on one device and compare the losses and "
             "updated parameters (exit 1 above 1e-4 relative difference)"),
    cl::init(false), cl::cat(runCategory));
static cl::opt<int> threadsFlag(
    "threads-per-device",
    cl::desc("OpenMP threads per device (default: cores / devices, >= 1)"),
    cl::init(0), cl::cat(runCategory));
static cl::opt<std::string> deviceMemoryFlag(
    "device-memory",
    cl::desc("Device memory budget per device, e.g. 512MiB, 2GB (default: "
             "unlimited)"),
    cl::cat(runCategory));
static cl::opt<std::string>
    hostMemoryFlag("host-memory",
                   cl::desc("Host memory budget per device (default: "
                            "unlimited)"),
                   cl::cat(runCategory));
static cl::opt<std::string>
    outputDirFlag("output-dir",
                  cl::desc("output_dir: metrics.csv and loss.png go to "
                           "OUTPUT_DIR/RUN_NAME/"),
                  cl::cat(runCategory));
static cl::opt<std::string>
    runNameFlag("run-name",
                cl::desc("run_name (default: the date and time)"),
                cl::cat(runCategory));
static cl::opt<std::string> checkpointDirFlag(
    "checkpoint-dir",
    cl::desc("Write sharded checkpoints here (every --checkpoint-every "
             "steps and at the end)"),
    cl::cat(runCategory));
static cl::opt<int64_t> checkpointEveryFlag(
    "checkpoint-every",
    cl::desc("checkpoint_every: steps between checkpoints (0 or -1: only at "
             "the end)"),
    cl::init(0), cl::cat(runCategory));
static cl::opt<bool>
    resumeFlag("resume",
               cl::desc("Continue from the latest complete checkpoint in "
                        "--checkpoint-dir (on any mesh)"),
               cl::init(false), cl::cat(runCategory));
static cl::opt<std::string>
    initFromFlag("init-from",
                 cl::desc("Load the parameters by name from a safetensors "
                          "file"),
                 cl::value_desc("file.safetensors"), cl::cat(runCategory));
static cl::opt<std::string>
    exportFlag("export",
               cl::desc("Write the trained parameters to a safetensors file"),
               cl::value_desc("file.safetensors"), cl::cat(runCategory));
static cl::opt<std::string>
    traceFlag("trace",
              cl::desc("Write a Chrome trace (one track per device; open in "
                       "Perfetto)"),
              cl::value_desc("file.json"), cl::cat(runCategory));
static cl::opt<int64_t> traceSkipFlag(
    "trace-skip-steps",
    cl::desc("skip_first_n_steps_for_profiler: steps run before the trace "
             "starts (default 0)"),
    cl::init(0), cl::cat(runCategory));
static cl::opt<int64_t>
    traceStepsFlag("trace-steps",
                   cl::desc("profiler_steps: steps the trace covers "
                            "(default 10)"),
                   cl::init(10), cl::cat(runCategory));
static cl::opt<std::string>
    cacheDirFlag("cache-dir",
                 cl::desc("Where compiled programs are cached (default: "
                          "$SD_CACHE_DIR, $XDG_CACHE_HOME/sd, ~/.cache/sd)"),
                 cl::cat(runCategory));


namespace {

/// `%g`: 0.3, 1.2, 8.
std::string shortDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

std::string display(const std::string &value) {
  return value.empty() ? "''" : value;
}
std::string display(double value) { return shortDouble(value); }
std::string display(int64_t value) { return std::to_string(value); }
std::string display(uint64_t value) { return std::to_string(value); }
std::string display(llvm::ArrayRef<std::string> value) {
  return "[" + llvm::join(value, ", ") + "]";
}

int fail(const Twine &message) {
  errs() << "sdrun: error: " << message << "\n";
  return 1;
}

/// Merges the flags, the config file and its key=value overrides, and
/// records where each setting came from for --print-config.
class Resolver {
public:
  explicit Resolver(const sd::RunConfig *config) : config(config) {}

  /// The flag when it was given, else the config's value when set, else
  /// the flag's default.
  template <typename T, typename Flag>
  T pick(StringRef key, const Flag &flag, const std::optional<T> &fromConfig) {
    if (flag.getNumOccurrences()) {
      T value = flag.getValue();
      record(key, display(value), ("--" + flag.ArgStr).str());
      return value;
    }
    if (fromConfig) {
      record(key, display(*fromConfig), configSource(key));
      return *fromConfig;
    }
    T value = flag.getValue();
    record(key, display(value), "default");
    return value;
  }

  void record(StringRef key, const std::string &value,
              const std::string &source) {
    rows.push_back({key.str(), value, source});
  }

  /// "file.yml:12" or "command line" for a key the config set.
  std::string configSource(StringRef key) const {
    std::string origin = config->originOf(key);
    if (origin.empty())
      return llvm::sys::path::filename(config->fileName).str();
    return llvm::sys::path::filename(origin).str();
  }

  /// The origin of the first of `keys` the config set.
  std::string configSource(std::initializer_list<StringRef> keys) const {
    for (StringRef key : keys)
      if (!config->originOf(key).empty())
        return configSource(key);
    return configSource(*keys.begin());
  }

  void print(raw_ostream &os) const {
    size_t width = 0;
    for (const Row &row : rows)
      width = std::max(width, row.key.size());
    for (const Row &row : rows)
      os << "  " << left_justify(row.key, width) << "  " << row.value
         << "  (" << row.source << ")\n";
  }

private:
  struct Row {
    std::string key, value, source;
  };
  const sd::RunConfig *config;
  std::vector<Row> rows;
};

/// `data:2,fsdp:4` from the config's per-axis sizes: the axes whose ICI or
/// DCN size is not 1, in MaxDiffusion's axis order (a mesh without an axis
/// behaves like a mesh with that axis of size 1).
void configMesh(const sd::RunConfig &config, std::string &ici,
                std::string &dcn) {
  std::vector<std::string> iciParts, dcnParts;
  bool anyDcn = false;
  for (size_t axis = 0; axis < sd::kConfigMeshAxes.size(); ++axis) {
    int64_t i = config.ici[axis].value_or(1), d = config.dcn[axis].value_or(1);
    if (i == 1 && d == 1)
      continue;
    std::string name(sd::kConfigMeshAxes[axis]);
    iciParts.push_back(name + ":" + std::to_string(i));
    dcnParts.push_back(name + ":" + std::to_string(d));
    anyDcn |= d != 1;
  }
  ici = llvm::join(iciParts, ",");
  dcn = anyDcn ? llvm::join(dcnParts, ",") : "";
}

/// `logical_axis_rules` as YAML (for rules a key=value argument set).
std::string rulesYaml(const sd::LogicalAxisRules &rules) {
  std::string text = "logical_axis_rules: [\n";
  for (const sd::LogicalAxisRule &rule : rules.rules) {
    text += "  ['" + rule.logicalName + "', [";
    for (size_t i = 0; i < rule.meshAxes.size(); ++i)
      text += (i ? ", '" : "'") + rule.meshAxes[i] + "'";
    text += "]],\n";
  }
  return text + "]\n";
}

/// "20261122-110512": MaxText's default run name is the time.
std::string timestampRunName() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%d-%H%M%S", std::localtime(&now));
  return text;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "sdrun: train an sd model on a device mesh\n");

  // The config file and its key=value overrides.
  std::optional<sd::RunConfig> config;
  llvm::StringSet<> overridden;
  if (!configFlag.empty()) {
    absl::StatusOr<sd::RunConfig> loaded = sd::loadRunConfig(configFlag);
    if (!loaded.ok())
      return fail(std::string(loaded.status().message()));
    config = std::move(*loaded);
  } else if (!overrideArgs.empty()) {
    return fail("'" + overrideArgs.front() +
                "': key=value arguments override a --config file");
  }
  if (config) {
    std::vector<std::string> overrides(overrideArgs.begin(),
                                       overrideArgs.end());
    if (absl::Status status = sd::applyOverrides(*config, overrides);
        !status.ok())
      return fail(std::string(status.message()));
    for (const std::string &arg : overrides)
      overridden.insert(StringRef(arg).split('=').first.trim());
  }
  static const sd::RunConfig noConfig;
  const sd::RunConfig &file = config ? *config : noConfig;
  if (!file.ignoredKeys.empty())
    errs() << "sdrun: warning: " << llvm::sys::path::filename(file.fileName)
           << ": ignoring " << file.ignoredKeys.size()
           << (file.ignoredKeys.size() == 1 ? " key" : " keys")
           << " sd does not use: " << llvm::join(file.ignoredKeys, ", ")
           << "\n";
  Resolver settings(&file);
  mlir::sd::TrainRunOptions run;
  run.modelPath = modelPath;
  std::vector<std::string> &notes = run.notes;

  // The mesh.
  mlir::sd::PipelineOptions &options = run.pipeline;
  options.train = true;
  options.devices = devicesFlag;
  std::string meshSource = meshFlag.getNumOccurrences() ? "--mesh" : "default";
  if (meshFlag.getNumOccurrences() || !config) {
    options.mesh = meshFlag;
  } else {
    configMesh(file, options.mesh, options.dcnMesh);
    meshSource = settings.configSource(
        {"ici_data_parallelism", "ici_fsdp_parallelism",
         "ici_context_parallelism", "ici_tensor_parallelism"});
    // One process: a -1 DCN axis is filled with 1.
    if (!options.dcnMesh.empty())
      options.processes = 1;
    bool fill = options.mesh.find("-1") != std::string::npos;
    if (fill && devicesFlag == 0) {
      unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      options.devices = cores;
      notes.push_back(formatv("mesh: the -1 axis is filled with {0} devices "
                              "(one per core; --devices=N sets another "
                              "count)",
                              cores)
                          .str());
    }
  }
  sd::MeshSpec mesh({sd::MeshAxis{"data", 1, 1}});
  if (!options.mesh.empty()) {
    sd::MeshOptions meshOptions;
    if (options.devices > 0)
      meshOptions.devices = options.devices;
    if (options.processes > 0)
      meshOptions.processes = options.processes;
    absl::StatusOr<sd::MeshSpec> parsed =
        sd::parseMesh(options.mesh, options.dcnMesh, meshOptions);
    if (!parsed.ok())
      return fail(std::string(parsed.status().message()));
    mesh = *parsed;
  }
  if (devicesFlag > 0 && devicesFlag != mesh.numDevices())
    return fail("mesh " + mesh.toString() + " has " +
                Twine(mesh.numDevices()) + " devices, but --devices=" +
                Twine(devicesFlag));
  run.mesh = mesh;
  {
    std::string value =
        options.mesh.empty() ? std::string("one device") : mesh.toString();
    if (!options.mesh.empty() && options.mesh != value)
      value += " (ici " + options.mesh +
               (options.dcnMesh.empty() ? "" : ", dcn " + options.dcnMesh) +
               ")";
    settings.record("mesh", value, meshSource);
  }

  // The batch.
  double perDevice = settings.pick<double>(
      "per_device_batch_size", perDeviceBatchFlag, file.perDeviceBatchSize);
  options.batch = batchFlag;
  if (batchFlag.getNumOccurrences() && perDeviceBatchFlag.getNumOccurrences())
    return fail("give --batch or --per-device-batch, not both");
  if (batchFlag.getNumOccurrences()) {
    settings.record("batch", display(int64_t(batchFlag)), "--batch");
  } else if (perDevice != 0.0) {
    double global = perDevice * static_cast<double>(mesh.numDevices());
    if (!(global >= 1.0) || std::fabs(global - std::round(global)) > 1e-9)
      return fail(formatv("{0}={1} × {2} devices = {3} is not a whole, "
                          "positive global batch",
                          perDeviceBatchFlag.getNumOccurrences()
                              ? "--per-device-batch"
                              : "per_device_batch_size",
                          shortDouble(perDevice), mesh.numDevices(),
                          shortDouble(global)));
    options.batch = static_cast<int64_t>(std::llround(global));
  }
  if (options.batch < 0)
    return fail("--batch must be positive, not " + Twine(options.batch));

  // The step: rules, remat policy, optimizer.
  std::string rulesPath;
  std::unique_ptr<llvm::FileRemover> rulesFile;
  if (rulesFlag.getNumOccurrences() || !file.rules) {
    options.rules = settings.pick<std::string>("logical_axis_rules", rulesFlag,
                                               std::nullopt);
  } else if (!overridden.contains("logical_axis_rules")) {
    options.rules = file.fileName;
    settings.record("logical_axis_rules",
                    formatv("{0} rules", file.rules->rules.size()).str(),
                    settings.configSource("logical_axis_rules"));
  } else {
    // Rules a key=value argument gave reach the pipeline as a file.
    SmallString<128> path;
    int fd;
    if (std::error_code error = llvm::sys::fs::createTemporaryFile(
            "sdrun-rules", "yml", fd, path))
      return fail("cannot create a temporary file: " + error.message());
    {
      raw_fd_ostream os(fd, /*shouldClose=*/true);
      os << rulesYaml(*file.rules);
    }
    rulesFile = std::make_unique<llvm::FileRemover>(path);
    options.rules = path.str().str();
    settings.record("logical_axis_rules",
                    formatv("{0} rules", file.rules->rules.size()).str(),
                    "logical_axis_rules=...");
  }
  mlir::sd::DifferentiateOptions &train = options.differentiate;
  train.remat =
      settings.pick<std::string>("remat_policy", rematFlag, file.rematPolicy);
  std::optional<std::vector<std::string>> saved, offloaded;
  if (namesSavedFlag.getNumOccurrences())
    saved = std::vector<std::string>(namesSavedFlag.begin(),
                                     namesSavedFlag.end());
  else
    saved = file.namesSaved;
  if (namesOffloadedFlag.getNumOccurrences())
    offloaded = std::vector<std::string>(namesOffloadedFlag.begin(),
                                         namesOffloadedFlag.end());
  else
    offloaded = file.namesOffloaded;
  // MaxDiffusion's configs list names for every policy; they mean
  // something only to CUSTOM.
  if (train.remat == "CUSTOM") {
    train.namesSaved.clear();
    train.namesOffloaded.clear();
    if (saved)
      train.namesSaved.append(saved->begin(), saved->end());
    if (offloaded)
      train.namesOffloaded.append(offloaded->begin(), offloaded->end());
    settings.record("names_which_can_be_saved", display(train.namesSaved),
                    namesSavedFlag.getNumOccurrences()
                        ? "--names-saved"
                        : settings.configSource("names_which_can_be_saved"));
    settings.record("names_which_can_be_offloaded",
                    display(train.namesOffloaded),
                    namesOffloadedFlag.getNumOccurrences()
                        ? "--names-offloaded"
                        : settings.configSource("names_which_can_be_offloaded"));
  } else if (namesSavedFlag.getNumOccurrences() ||
             namesOffloadedFlag.getNumOccurrences()) {
    // The pass reports names given to another policy.
    train.namesSaved.clear();
    train.namesOffloaded.clear();
    if (saved)
      train.namesSaved.append(saved->begin(), saved->end());
    if (offloaded)
      train.namesOffloaded.append(offloaded->begin(), offloaded->end());
  }
  run.steps =
      settings.pick<int64_t>("max_train_steps", stepsFlag, file.maxTrainSteps);
  if (run.steps < 1)
    return fail(Twine(stepsFlag.getNumOccurrences() ? "--steps"
                                                    : "max_train_steps") +
                " must be at least 1, not " + Twine(run.steps));
  train.learningRate =
      settings.pick<double>("learning_rate", lrFlag, file.learningRate);
  if (warmupFlag.getNumOccurrences() || !file.warmupStepsFraction) {
    train.warmupSteps =
        settings.pick<int64_t>("warmup_steps", warmupFlag, std::nullopt);
  } else {
    train.warmupSteps = static_cast<int64_t>(
        std::llround(*file.warmupStepsFraction * run.steps));
    settings.record("warmup_steps",
                    formatv("{0} (warmup_steps_fraction {1} × {2} steps)",
                            train.warmupSteps,
                            shortDouble(*file.warmupStepsFraction), run.steps)
                        .str(),
                    settings.configSource("warmup_steps_fraction"));
  }
  train.beta1 = settings.pick<double>("adam_b1", adamB1Flag, file.adamB1);
  train.beta2 = settings.pick<double>("adam_b2", adamB2Flag, file.adamB2);
  train.epsilon = settings.pick<double>("adam_eps", adamEpsFlag, file.adamEps);
  train.weightDecay = settings.pick<double>(
      "adam_weight_decay", weightDecayFlag, file.adamWeightDecay);
  // MaxDiffusion clips only with opt_enable_grad_global_norm_clipping.
  std::optional<double> clip = file.maxGradNorm;
  if (file.gradNormClipping && !*file.gradNormClipping)
    clip = 0.0;
  train.maxGradNorm =
      settings.pick<double>("max_grad_norm", maxGradNormFlag, clip);
  if (clip && *clip == 0.0 && file.maxGradNorm && *file.maxGradNorm != 0.0 &&
      !maxGradNormFlag.getNumOccurrences())
    notes.push_back("max_grad_norm: not applied, since "
                    "opt_enable_grad_global_norm_clipping is false");
  run.seed = settings.pick<uint64_t>("seed", seedFlag, file.seed);

  // Outputs.
  std::string outputDir =
      settings.pick<std::string>("output_dir", outputDirFlag, file.outputDir);
  run.runName =
      settings.pick<std::string>("run_name", runNameFlag, file.runName);
  if (!outputDir.empty()) {
    if (run.runName.empty())
      run.runName = timestampRunName();
    run.runDir = outputDir + "/" + run.runName;
  }
  int64_t every = settings.pick<int64_t>("checkpoint_every",
                                         checkpointEveryFlag,
                                         file.checkpointEvery);
  run.checkpointEvery = std::max<int64_t>(every, 0);
  run.checkpointDir = checkpointDirFlag;
  run.resume = resumeFlag;
  run.initFrom = initFromFlag;
  run.exportPath = exportFlag;
  run.tracePath = traceFlag;
  if (run.tracePath.empty() && file.enableProfiler.value_or(false)) {
    // MaxDiffusion's enable_profiler: the trace goes beside the metrics.
    run.tracePath =
        run.runDir.empty() ? std::string("trace.json") : run.runDir + "/trace.json";
    settings.record("enable_profiler", "true -> " + run.tracePath,
                    settings.configSource("enable_profiler"));
  }
  run.traceSkipSteps = settings.pick<int64_t>(
      "skip_first_n_steps_for_profiler", traceSkipFlag,
      file.skipFirstNStepsForProfiler);
  run.traceSteps = settings.pick<int64_t>("profiler_steps", traceStepsFlag,
                                          file.profilerSteps);
  if (run.traceSkipSteps < 0)
    return fail("--trace-skip-steps must not be negative");
  if (run.traceSteps < 1)
    return fail("--trace-steps must be at least 1");
  run.metricsPath = metricsFlag;
  run.verify = verifyFlag;
  run.cacheDir = cacheDirFlag;
  if (config && every > 0 && run.checkpointDir.empty() &&
      !checkpointEveryFlag.getNumOccurrences())
    notes.push_back(formatv("checkpoint_every: {0} needs --checkpoint-dir "
                            "to write checkpoints",
                            every)
                        .str());

  // What the config sets that sd records but does not apply.
  if (file.flashBlockSizes) {
    settings.record("flash_block_sizes", file.flashBlockSizes->toString(),
                    settings.configSource("flash_block_sizes"));
    notes.push_back("flash_block_sizes: " + file.flashBlockSizes->toString() +
                    " (sd does not tile attention into flash blocks yet; "
                    "attention runs unblocked)");
  }
  for (auto [key, value] :
       {std::pair<StringRef, const std::optional<std::string> *>{
            "weights_dtype", &file.weightsDtype},
        {"activations_dtype", &file.activationsDtype}}) {
    if (!*value)
      continue;
    settings.record(key, **value, settings.configSource(key));
    StringRef dtype = **value;
    if (dtype != "float32" && dtype != "fp32" && dtype != "f32")
      notes.push_back((key + ": " + dtype +
                       " is not applied; sd trains in float32 (this CPU has "
                       "no bfloat16 arithmetic)")
                          .str());
  }

  // Sizes and threads.
  if (!deviceMemoryFlag.empty()) {
    std::optional<int64_t> size = sd::rt::parseByteSize(deviceMemoryFlag);
    if (!size)
      return fail("--device-memory='" + deviceMemoryFlag +
                  "' is not a size (e.g. 512MiB, 2GB)");
    run.deviceMemoryBudget = *size;
  }
  if (!hostMemoryFlag.empty()) {
    std::optional<int64_t> size = sd::rt::parseByteSize(hostMemoryFlag);
    if (!size)
      return fail("--host-memory='" + hostMemoryFlag +
                  "' is not a size (e.g. 512MiB, 2GB)");
    run.hostMemoryBudget = *size;
  }
  if (threadsFlag < 0)
    return fail("--threads-per-device must not be negative");
  run.threadsPerDevice = threadsFlag;

  if (printConfigFlag) {
    outs() << "sdrun settings for " << modelPath;
    if (config)
      outs() << " (" << file.fileName << ")";
    outs() << ":\n";
    settings.print(outs());
    for (const std::string &note : notes)
      outs() << note << "\n";
    return 0;
  }

  mlir::DialectRegistry registry;
  registry.insert<mlir::sd::SDDialect, mlir::func::FuncDialect>();
  mlir::func::registerInlinerExtension(registry);
  mlir::sd::registerAllSDExtensions(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  // Compiler errors are printed where they arise; sdrun adds no second
  // message for them.
  bool sawError = false;
  context.getDiagEngine().registerHandler([&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error)
      sawError = true;
    return mlir::failure();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(modelPath, sourceMgr,
                                            mlir::ParserConfig(&context));
  if (!module)
    return sawError ? 1 : fail("could not parse '" + modelPath + "'");
  return mlir::sd::runTraining(*module, run, [&] { return sawError; });
}
