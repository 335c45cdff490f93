//===- ToolFlags.cpp - Run-specification flags of the tools ---------------===//
//
// Each flag is bound to the RunSpecFlags field it sets, so that reading the
// command line back is one loop. Defaults live in the resolver
// (RunSpec.cpp), which also checks the values: a flag here only says what
// was given.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/ToolFlags.h"

using namespace mlir::sd;
namespace cl = llvm::cl;
using ::sd::RunSpecFlags;

struct ToolFlags::BoundFlag {
  virtual ~BoundFlag() = default;
  /// Sets the field when the flag was given.
  virtual void store(RunSpecFlags &flags) const = 0;
};

namespace {

using BoundFlags = std::vector<const ToolFlags::BoundFlag *>;

/// A cl::opt<T> that sets `std::optional<T> RunSpecFlags::*field` and adds
/// itself to the flags of its ToolFlags.
template <typename T> class Flag final : public ToolFlags::BoundFlag {
public:
  template <typename... Mods>
  Flag(BoundFlags &all, std::optional<T> RunSpecFlags::*field,
       llvm::StringRef name, const Mods &...mods)
      : option(name, mods...), field(field) {
    all.push_back(this);
  }

  void store(RunSpecFlags &flags) const override {
    if (option.getNumOccurrences())
      flags.*field = option.getValue();
  }

  cl::opt<T> option;

private:
  std::optional<T> RunSpecFlags::*field;
};

/// A comma-separated list of names (--names-saved=a,b).
class NamesFlag final : public ToolFlags::BoundFlag {
public:
  NamesFlag(BoundFlags &all,
            std::optional<std::vector<std::string>> RunSpecFlags::*field,
            llvm::StringRef name, const cl::desc &desc,
            cl::OptionCategory &category)
      : option(name, cl::CommaSeparated, desc, cl::cat(category)),
        field(field) {
    all.push_back(this);
  }

  void store(RunSpecFlags &flags) const override {
    if (option.getNumOccurrences())
      flags.*field = std::vector<std::string>(option.begin(), option.end());
  }

private:
  cl::list<std::string> option;
  std::optional<std::vector<std::string>> RunSpecFlags::*field;
};

using F = RunSpecFlags;

} // namespace

/// The flags every tool has: mesh, network, rules, batch and attention
/// (under `attentionCat`).
struct ToolFlags::MeshOptions {
  BoundFlags &all;
  cl::OptionCategory &meshCat, &attentionCat;
  const char *batchHelp;

  Flag<std::string> mesh{all, &F::mesh, "mesh",
                         cl::desc("Device mesh (ICI), e.g. data:8,fsdp:4; -1 "
                                  "fills from --devices, or one device a "
                                  "core (default: one device)"),
                         cl::cat(meshCat)};
  Flag<int64_t> devices{all, &F::devices, "devices",
                        cl::desc("Device count (fills a -1 mesh axis)"),
                        cl::cat(meshCat)};
  Flag<std::string> dcnMesh{
      all, &F::dcnMesh, "dcn-mesh",
      cl::desc("Mesh part across processes/hosts, e.g. data:2 (sdrun and "
               "sdsample: one MPI rank per process, launched by mpirun)"),
      cl::cat(meshCat)};
  Flag<std::string> iciBandwidth{
      all, &F::iciBandwidth, "ici-bandwidth",
      cl::desc("Cost model: bytes per second a device sends to the devices "
               "of its process, e.g. 100GB/s (default 10GB/s, shared memory)"),
      cl::cat(meshCat)};
  Flag<std::string> dcnBandwidth{
      all, &F::dcnBandwidth, "dcn-bandwidth",
      cl::desc("Cost model: bytes per second a process sends to other "
               "processes, shared by its devices, e.g. 100Gb/s (default "
               "25Gb/s Ethernet)"),
      cl::cat(meshCat)};
  Flag<std::string> iciLatency{
      all, &F::iciLatency, "ici-latency",
      cl::desc("Cost model: seconds per ring step inside a process, e.g. "
               "5us (default 1us)"),
      cl::cat(meshCat)};
  Flag<std::string> dcnLatency{
      all, &F::dcnLatency, "dcn-latency",
      cl::desc("Cost model: seconds per ring step between processes "
               "(default 25us)"),
      cl::cat(meshCat)};
  Flag<std::string> rules{
      all, &F::rules, "rules",
      cl::desc("Logical axis rules: dit (default), sdxl, flux, wan, or a "
               "MaxDiffusion YAML file"),
      cl::cat(meshCat)};
  Flag<int64_t> batch{all, &F::batch, "batch", cl::desc(batchHelp),
                      cl::cat(meshCat)};
  Flag<double> perDeviceBatch{
      all, &F::perDeviceBatch, "per-device-batch",
      cl::desc("MaxDiffusion's per_device_batch_size (may be fractional); "
               "global batch = this × devices"),
      cl::cat(meshCat)};

  Flag<std::string> attention{
      all, &F::attention, "attention",
      cl::desc("Attention: dot_product (default: one score matrix per "
               "head), flash (tiled into flash-attention blocks; a sharded "
               "sequence's keys and values all-gathered), ring, ulysses or "
               "ulysses_ring (tiled, self-attention spread over the "
               "sequence's mesh axes), or auto (the one the cost model "
               "finds cheapest)"),
      cl::cat(attentionCat)};
  Flag<int64_t> ulyssesShards{
      all, &F::ulyssesShards, "ulysses-shards",
      cl::desc("ulysses_shards: devices per Ulysses group of "
               "--attention=ulysses_ring (the ring runs across the groups)"),
      cl::cat(attentionCat)};
  Flag<int64_t> flashMinSeqLength{
      all, &F::flashMinSeqLength, "flash-min-seq-length",
      cl::desc("flash_min_seq_length: attention whose query is shorter "
               "stays dot_product under a tiled --attention (default 0: "
               "none)"),
      cl::cat(attentionCat)};
  Flag<std::string> flashBlockSizes{
      all, &F::flashBlockSizes, "flash-block-sizes",
      cl::desc("flash_block_sizes as MaxDiffusion's JSON, e.g. "
               "'{\"block_q\": 256, \"block_kv\": 1024}' (default: derived "
               "from the cache)"),
      cl::cat(attentionCat)};
};

/// The training step's: remat policy and optimizer (sdopt, sdrun).
struct ToolFlags::StepOptions {
  BoundFlags &all;
  cl::OptionCategory &stepCat;

  Flag<std::string> remat{
      all, &F::remat, "remat",
      cl::desc("Remat policy: NONE (default), FULL, MATMUL_WITHOUT_BATCH, "
               "OFFLOAD_MATMUL_WITHOUT_BATCH, HIDDEN_STATE_WITH_OFFLOAD, "
               "FLUX_OPTIMIZED, CUSTOM"),
      cl::cat(stepCat)};
  NamesFlag namesSaved{
      all, &F::namesSaved, "names-saved",
      cl::desc("CUSTOM: names_which_can_be_saved (comma-separated sd.names)"),
      stepCat};
  NamesFlag namesOffloaded{
      all, &F::namesOffloaded, "names-offloaded",
      cl::desc("CUSTOM: names_which_can_be_offloaded (comma-separated)"),
      stepCat};
  Flag<double> learningRate{all, &F::learningRate, "lr",
                            cl::desc("Peak learning rate (default 1e-4)"),
                            cl::cat(stepCat)};
  Flag<int64_t> warmupSteps{all, &F::warmupSteps, "warmup-steps",
                            cl::desc("Linear warm-up steps (default 0)"),
                            cl::cat(stepCat)};
  Flag<double> adamB1{all, &F::adamB1, "adam-b1",
                      cl::desc("AdamW beta1 (default 0.9)"), cl::cat(stepCat)};
  Flag<double> adamB2{all, &F::adamB2, "adam-b2",
                      cl::desc("AdamW beta2 (default 0.999)"),
                      cl::cat(stepCat)};
  Flag<double> adamEps{all, &F::adamEps, "adam-eps",
                       cl::desc("AdamW epsilon (default 1e-8)"),
                       cl::cat(stepCat)};
  Flag<double> weightDecay{
      all, &F::weightDecay, "adam-weight-decay",
      cl::desc("AdamW decoupled weight decay (default 1e-2)"),
      cl::cat(stepCat)};
  cl::alias weightDecayAlias{
      "weight-decay", cl::desc("Alias for --adam-weight-decay"),
      cl::aliasopt(weightDecay.option), cl::cat(stepCat)};
  Flag<double> maxGradNorm{
      all, &F::maxGradNorm, "max-grad-norm",
      cl::desc("Clip gradients to this global norm (default 0: no clipping)"),
      cl::cat(stepCat)};
  Flag<double> emaDecay{
      all, &F::emaDecay, "ema-decay",
      cl::desc("ema_decay: keep an exponential moving average of the "
               "parameters in the step (DiT: 0.9999; default 0: none)"),
      cl::cat(stepCat)};
};

/// sdopt's: the process count of a mesh across processes (sdrun's is
/// mpirun's), and microbatches.
struct ToolFlags::SdoptOptions {
  BoundFlags &all;
  cl::OptionCategory &meshCat, &stepCat;

  Flag<int64_t> processes{all, &F::processes, "processes",
                          cl::desc("Process count (fills a -1 DCN axis)"),
                          cl::cat(meshCat)};
  Flag<int64_t> gradAccum{
      all, &F::gradAccum, "grad-accum",
      cl::desc("Microbatches accumulated per training step (default 1)"),
      cl::cat(stepCat)};
};

/// sdrun's and sdsample's: the model, the config, and the devices the
/// program runs on.
struct ToolFlags::DeviceOptions {
  BoundFlags &all;
  cl::OptionCategory &deviceCat;
  const char *configHelp, *argumentsHelp;

  cl::opt<std::string> modelPath{cl::Positional, cl::Required,
                                 cl::desc("<model.mlir>")};
  /// After the model, MaxDiffusion's way: a config file (as --config) and,
  /// for sdrun, key=value overrides of its keys.
  cl::list<std::string> arguments{cl::Positional, cl::ZeroOrMore,
                                  cl::desc(argumentsHelp)};
  Flag<std::string> config{all,
                           &F::config,
                           "config",
                           cl::desc(configHelp),
                           cl::value_desc("file.yml"),
                           cl::cat(deviceCat)};
  Flag<int64_t> threadsPerDevice{
      all, &F::threadsPerDevice, "threads-per-device",
      cl::desc("OpenMP threads per device (default: cores / devices, >= 1)"),
      cl::cat(deviceCat)};
  Flag<std::string> deviceMemory{
      all, &F::deviceMemory, "device-memory",
      cl::desc("Device memory budget per device, e.g. 512MiB, 2GB (default: "
               "unlimited)"),
      cl::cat(deviceCat)};
  Flag<std::string> hostMemory{
      all, &F::hostMemory, "host-memory",
      cl::desc("Host memory budget per device (default: unlimited)"),
      cl::cat(deviceCat)};
  Flag<std::string> hostMemoryLimit{
      all, &F::hostMemoryLimit, "host-memory-limit",
      cl::desc("Resident memory one process may use, e.g. 6GiB: a run whose "
               "predicted peak is larger is refused before compiling "
               "(default: the machine's memory over its processes)"),
      cl::cat(deviceCat)};
  Flag<std::string> cacheDir{
      all, &F::cacheDir, "cache-dir",
      cl::desc("Where compiled programs are cached (default: $SD_CACHE_DIR, "
               "$XDG_CACHE_HOME/sd, ~/.cache/sd)"),
      cl::cat(deviceCat)};
  Flag<double> collectiveTimeout{
      all,
      &F::collectiveTimeout,
      "collective-timeout",
      cl::desc("Under mpirun: seconds a collective waits for another rank "
               "before the run fails naming it (default 600)"),
      cl::value_desc("seconds"),
      cl::cat(deviceCat)};
};

/// sdrun's: --print-config, --compile-only and the run around the step.
struct ToolFlags::RunOptions {
  BoundFlags &all;
  cl::OptionCategory &runCat;

  cl::opt<bool> printConfig{
      "print-config",
      cl::desc("Print the resolved run settings, where each came from, and "
               "exit"),
      cl::cat(runCat)};
  cl::opt<bool> compileOnly{
      "compile-only",
      cl::desc("Build and compile the device program (or find it in the "
               "cache), print where it is, and exit"),
      cl::cat(runCat)};
  Flag<int64_t> steps{
      all, &F::steps, "steps",
      cl::desc("Steps the run ends at (max_train_steps; default 10)"),
      cl::cat(runCat)};
  Flag<uint64_t> seed{all, &F::seed, "seed",
                      cl::desc("Seed of the parameters and the batch"),
                      cl::cat(runCat)};
  Flag<std::string> metrics{
      all,
      &F::metricsPath,
      "metrics",
      cl::desc("Write one JSON object per step to this file"),
      cl::value_desc("file.jsonl"),
      cl::cat(runCat)};
  Flag<bool> verify{
      all, &F::verify, "verify",
      cl::desc("Also run the steps on one device and compare the losses and "
               "updated parameters (exit 1 above 1e-4 relative difference)"),
      cl::cat(runCat)};
  Flag<bool> allowNonfiniteLoss{
      all, &F::allowNonfiniteLoss, "allow-nonfinite-loss",
      cl::desc("Go on after a step whose loss is NaN or infinite (default: "
               "stop there with an error, before checkpointing it)"),
      cl::cat(runCat)};
  Flag<bool> traceAllRanks{
      all, &F::traceAllRanks, "trace-all-ranks",
      cl::desc("Under mpirun: every rank writes its devices' trace (rank r: "
               "FILE.rankR.json beside --trace=FILE.json), not rank 0 alone"),
      cl::cat(runCat)};
  Flag<std::string> outputDir{
      all, &F::outputDir, "output-dir",
      cl::desc("output_dir: metrics.csv and loss.png go to "
               "OUTPUT_DIR/RUN_NAME/"),
      cl::cat(runCat)};
  Flag<std::string> runName{all, &F::runName, "run-name",
                            cl::desc("run_name (default: the date and time)"),
                            cl::cat(runCat)};
  Flag<std::string> checkpointDir{
      all, &F::checkpointDir, "checkpoint-dir",
      cl::desc("Write sharded checkpoints here (every --checkpoint-every "
               "steps and at the end)"),
      cl::cat(runCat)};
  Flag<int64_t> checkpointEvery{
      all, &F::checkpointEvery, "checkpoint-every",
      cl::desc("checkpoint_every: steps between checkpoints (0 or -1: only "
               "at the end)"),
      cl::cat(runCat)};
  Flag<bool> resume{all, &F::resume, "resume",
                    cl::desc("Continue from the latest complete checkpoint in "
                             "--checkpoint-dir (on any mesh)"),
                    cl::cat(runCat)};
  Flag<std::string> initFrom{
      all,
      &F::initFrom,
      "init-from",
      cl::desc("Load the parameters by name from a safetensors file"),
      cl::value_desc("file.safetensors"),
      cl::cat(runCat)};
  Flag<std::string> datasetType{
      all, &F::datasetType, "dataset-type",
      cl::desc("dataset_type: synthetic (default: a generated data set of "
               "one batch, fresh noise every step) or sd (--train-data-dir)"),
      cl::cat(runCat)};
  Flag<std::string> trainDataDir{
      all, &F::trainDataDir, "train-data-dir",
      cl::desc("train_data_dir: a data set sddata wrote (dataset_type sd)"),
      cl::value_desc("dir"), cl::cat(runCat)};
  Flag<double> classDropoutProb{
      all, &F::classDropoutProb, "class-dropout-prob",
      cl::desc("Probability that a sample's label is dropped to the null "
               "class, for classifier-free guidance (DiT: 0.1; default 0)"),
      cl::cat(runCat)};
  Flag<int64_t> evalEvery{
      all, &F::evalEvery, "eval-every",
      cl::desc("eval_every: steps between held-out losses (default 0: never)"),
      cl::cat(runCat)};
  Flag<std::string> exportEmaPath{
      all,
      &F::exportEmaPath,
      "export-ema",
      cl::desc("Write the EMA parameters (ema_decay) to a safetensors file, "
               "under the parameters' names"),
      cl::value_desc("file.safetensors"),
      cl::cat(runCat)};
  Flag<std::string> exportPath{
      all,
      &F::exportPath,
      "export",
      cl::desc("Write the trained parameters to a safetensors file"),
      cl::value_desc("file.safetensors"),
      cl::cat(runCat)};
  Flag<std::string> trace{
      all,
      &F::tracePath,
      "trace",
      cl::desc("Write a Chrome trace (one track per device; open in "
               "Perfetto)"),
      cl::value_desc("file.json"),
      cl::cat(runCat)};
  Flag<int64_t> traceSkipSteps{
      all, &F::traceSkipSteps, "trace-skip-steps",
      cl::desc("skip_first_n_steps_for_profiler: steps run before the trace "
               "starts (default 0)"),
      cl::cat(runCat)};
  Flag<int64_t> traceSteps{
      all, &F::traceSteps, "trace-steps",
      cl::desc("profiler_steps: steps the trace covers (default 10)"),
      cl::cat(runCat)};
};

ToolFlags::ToolFlags(Tool tool)
    : meshCategory("sd mesh and batch options"),
      stepCategory("sd training-step options"),
      deviceCategory("sd device options"),
      runCategory("sdrun options"), categoryList{&meshCategory} {
  bool sample = tool == Tool::Sdsample;
  mesh.reset(new MeshOptions{
      boundFlags, meshCategory, sample ? meshCategory : stepCategory,
      sample ? "Rows of one call of the device program (default: the "
               "model's; guidance uses two a sample)"
             : "Global batch (default: the model's)"});
  if (!sample) {
    step.reset(new StepOptions{boundFlags, stepCategory});
    categoryList.push_back(&stepCategory);
  }
  if (tool == Tool::Sdopt) {
    sdopt.reset(new SdoptOptions{boundFlags, meshCategory, stepCategory});
    return;
  }
  device.reset(new DeviceOptions{
      boundFlags, deviceCategory,
      sample ? "A MaxDiffusion-style YAML config: the mesh (ici_*/dcn_*), "
               "per_device_batch_size, logical_axis_rules and the attention "
               "keys as sdrun reads them, and num_inference_steps, "
               "guidance_scale, prediction_type"
             : "A MaxDiffusion-style YAML config (ici_*/dcn_* parallelism, "
               "per_device_batch_size, remat_policy, learning_rate, adam_*, "
               "max_train_steps, ...)",
      sample ? "[config.yml] (the same as --config=config.yml)"
             : "[config.yml] [key=value ...] (a config file, as "
               "--config=config.yml, and overrides of its keys)"});
  categoryList.push_back(&deviceCategory);
  if (tool == Tool::Sdrun) {
    run.reset(new RunOptions{boundFlags, runCategory});
    categoryList.push_back(&runCategory);
  }
}

ToolFlags::~ToolFlags() = default;

RunSpecFlags ToolFlags::values() const {
  RunSpecFlags flags;
  for (const BoundFlag *flag : boundFlags)
    flag->store(flags);
  if (device) {
    flags.modelPath = device->modelPath;
    flags.overrides.assign(device->arguments.begin(), device->arguments.end());
  }
  // sdsample reads its sampling keys from the file alone.
  flags.takesOverrides = run != nullptr;
  return flags;
}

bool ToolFlags::printConfig() const { return run && run->printConfig; }
bool ToolFlags::compileOnly() const { return run && run->compileOnly; }
