//===- ToolFlags.cpp - Run-specification flags of sdopt and sdrun ---------===//
//
// Each group of flags is a struct of llvm::cl options; ToolFlags makes the
// groups its tool has. Defaults live in the resolver (RunSpec.cpp), which
// also checks the values: a flag here only says what was given.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/ToolFlags.h"

using namespace mlir::sd;
namespace cl = llvm::cl;

namespace {

/// The value of a flag that was given.
template <typename T>
std::optional<T> given(const cl::opt<T> &flag) {
  if (!flag.getNumOccurrences())
    return std::nullopt;
  return flag.getValue();
}

std::optional<std::vector<std::string>>
given(const cl::list<std::string> &flag) {
  if (!flag.getNumOccurrences())
    return std::nullopt;
  return std::vector<std::string>(flag.begin(), flag.end());
}

} // namespace

/// The flags both tools have: mesh, rules, batch, training step.
struct ToolFlags::SpecOptions {
  SpecOptions(cl::OptionCategory &mesh, cl::OptionCategory &step)
      : meshFlag("mesh",
                 cl::desc("Device mesh (ICI), e.g. data:8,fsdp:4; -1 fills "
                          "from --devices (default: one device)"),
                 cl::cat(mesh)),
        devices("devices",
                cl::desc("Device count (fills a -1 mesh axis)"),
                cl::cat(mesh)),
        rules("rules",
              cl::desc("Logical axis rules: dit (default), sdxl, flux, wan, "
                       "or a MaxDiffusion YAML file"),
              cl::cat(mesh)),
        batch("batch", cl::desc("Global batch (default: the model's)"),
              cl::cat(mesh)),
        perDeviceBatch(
            "per-device-batch",
            cl::desc("MaxDiffusion's per_device_batch_size (may be "
                     "fractional); global batch = this × devices"),
            cl::cat(mesh)),
        remat("remat",
              cl::desc("Remat policy: NONE (default), FULL, "
                       "MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, "
                       "HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM"),
              cl::cat(step)),
        namesSaved("names-saved", cl::CommaSeparated,
                   cl::desc("CUSTOM: names_which_can_be_saved "
                            "(comma-separated sd.names)"),
                   cl::cat(step)),
        namesOffloaded("names-offloaded", cl::CommaSeparated,
                       cl::desc("CUSTOM: names_which_can_be_offloaded "
                                "(comma-separated)"),
                       cl::cat(step)),
        learningRate("lr", cl::desc("Peak learning rate (default 1e-4)"),
                     cl::cat(step)),
        warmupSteps("warmup-steps",
                    cl::desc("Linear warm-up steps (default 0)"),
                    cl::cat(step)),
        adamB1("adam-b1", cl::desc("AdamW beta1 (default 0.9)"),
               cl::cat(step)),
        adamB2("adam-b2", cl::desc("AdamW beta2 (default 0.999)"),
               cl::cat(step)),
        adamEps("adam-eps", cl::desc("AdamW epsilon (default 1e-8)"),
                cl::cat(step)),
        weightDecay("adam-weight-decay",
                    cl::desc("AdamW decoupled weight decay (default 1e-2)"),
                    cl::cat(step)),
        weightDecayAlias("weight-decay", cl::desc("Alias for --adam-weight-decay"),
                         cl::aliasopt(weightDecay), cl::cat(step)),
        maxGradNorm("max-grad-norm",
                    cl::desc("Clip gradients to this global norm (default 0: "
                             "no clipping)"),
                    cl::cat(step)) {}

  void fill(::sd::RunSpecFlags &flags) const {
    flags.mesh = given(meshFlag);
    flags.devices = given(devices);
    flags.rules = given(rules);
    flags.batch = given(batch);
    flags.perDeviceBatch = given(perDeviceBatch);
    flags.remat = given(remat);
    flags.namesSaved = given(namesSaved);
    flags.namesOffloaded = given(namesOffloaded);
    flags.learningRate = given(learningRate);
    flags.warmupSteps = given(warmupSteps);
    flags.adamB1 = given(adamB1);
    flags.adamB2 = given(adamB2);
    flags.adamEps = given(adamEps);
    flags.weightDecay = given(weightDecay);
    flags.maxGradNorm = given(maxGradNorm);
  }

  cl::opt<std::string> meshFlag;
  cl::opt<int64_t> devices;
  cl::opt<std::string> rules;
  cl::opt<int64_t> batch;
  cl::opt<double> perDeviceBatch;
  cl::opt<std::string> remat;
  cl::list<std::string> namesSaved, namesOffloaded;
  cl::opt<double> learningRate;
  cl::opt<int64_t> warmupSteps;
  cl::opt<double> adamB1, adamB2, adamEps, weightDecay;
  cl::alias weightDecayAlias;
  cl::opt<double> maxGradNorm;
};

/// sdopt's: a mesh across processes, and microbatches.
struct ToolFlags::SdoptOptions {
  SdoptOptions(cl::OptionCategory &mesh, cl::OptionCategory &step)
      : dcnMesh("dcn-mesh",
                cl::desc("Mesh part across processes/hosts, e.g. data:2"),
                cl::cat(mesh)),
        processes("processes",
                  cl::desc("Process count (fills a -1 DCN axis)"),
                  cl::cat(mesh)),
        gradAccum("grad-accum",
                  cl::desc("Microbatches accumulated per training step "
                           "(default 1)"),
                  cl::cat(step)) {}

  void fill(::sd::RunSpecFlags &flags) const {
    flags.dcnMesh = given(dcnMesh);
    flags.processes = given(processes);
    flags.gradAccum = given(gradAccum);
  }

  cl::opt<std::string> dcnMesh;
  cl::opt<int64_t> processes;
  cl::opt<int64_t> gradAccum;
};

/// sdrun's: the model, the config, and the run around the step.
struct ToolFlags::RunOptions {
  explicit RunOptions(cl::OptionCategory &run)
      : modelPath(cl::Positional, cl::Required, cl::desc("<model.mlir>")),
        overrides(cl::Positional, cl::ZeroOrMore,
                  cl::desc("[key=value ...] (override --config's keys)")),
        config("config",
               cl::desc("A MaxDiffusion-style YAML config (ici_*/dcn_* "
                        "parallelism, per_device_batch_size, remat_policy, "
                        "learning_rate, adam_*, max_train_steps, ...)"),
               cl::value_desc("file.yml"), cl::cat(run)),
        printConfig("print-config",
                    cl::desc("Print the resolved run settings, where each "
                             "came from, and exit"),
                    cl::cat(run)),
        steps("steps",
              cl::desc("Steps the run ends at (max_train_steps; default 10)"),
              cl::cat(run)),
        seed("seed", cl::desc("Seed of the parameters and the batch"),
             cl::cat(run)),
        metrics("metrics",
                cl::desc("Write one JSON object per step to this file"),
                cl::value_desc("file.jsonl"), cl::cat(run)),
        verify("verify",
               cl::desc("Also run the steps on one device and compare the "
                        "losses and updated parameters (exit 1 above 1e-4 "
                        "relative difference)"),
               cl::cat(run)),
        threadsPerDevice("threads-per-device",
                         cl::desc("OpenMP threads per device (default: cores "
                                  "/ devices, >= 1)"),
                         cl::cat(run)),
        deviceMemory("device-memory",
                     cl::desc("Device memory budget per device, e.g. 512MiB, "
                              "2GB (default: unlimited)"),
                     cl::cat(run)),
        hostMemory("host-memory",
                   cl::desc("Host memory budget per device (default: "
                            "unlimited)"),
                   cl::cat(run)),
        outputDir("output-dir",
                  cl::desc("output_dir: metrics.csv and loss.png go to "
                           "OUTPUT_DIR/RUN_NAME/"),
                  cl::cat(run)),
        runName("run-name", cl::desc("run_name (default: the date and time)"),
                cl::cat(run)),
        checkpointDir("checkpoint-dir",
                      cl::desc("Write sharded checkpoints here (every "
                               "--checkpoint-every steps and at the end)"),
                      cl::cat(run)),
        checkpointEvery("checkpoint-every",
                        cl::desc("checkpoint_every: steps between checkpoints "
                                 "(0 or -1: only at the end)"),
                        cl::cat(run)),
        resume("resume",
               cl::desc("Continue from the latest complete checkpoint in "
                        "--checkpoint-dir (on any mesh)"),
               cl::cat(run)),
        initFrom("init-from",
                 cl::desc("Load the parameters by name from a safetensors "
                          "file"),
                 cl::value_desc("file.safetensors"), cl::cat(run)),
        exportPath("export",
                   cl::desc("Write the trained parameters to a safetensors "
                            "file"),
                   cl::value_desc("file.safetensors"), cl::cat(run)),
        trace("trace",
              cl::desc("Write a Chrome trace (one track per device; open in "
                       "Perfetto)"),
              cl::value_desc("file.json"), cl::cat(run)),
        traceSkipSteps("trace-skip-steps",
                       cl::desc("skip_first_n_steps_for_profiler: steps run "
                                "before the trace starts (default 0)"),
                       cl::cat(run)),
        traceSteps("trace-steps",
                   cl::desc("profiler_steps: steps the trace covers (default "
                            "10)"),
                   cl::cat(run)),
        cacheDir("cache-dir",
                 cl::desc("Where compiled programs are cached (default: "
                          "$SD_CACHE_DIR, $XDG_CACHE_HOME/sd, ~/.cache/sd)"),
                 cl::cat(run)) {}

  void fill(::sd::RunSpecFlags &flags) const {
    flags.modelPath = modelPath;
    flags.overrides.assign(overrides.begin(), overrides.end());
    flags.config = given(config);
    flags.steps = given(steps);
    flags.seed = given(seed);
    flags.metricsPath = given(metrics);
    flags.verify = verify;
    flags.threadsPerDevice = given(threadsPerDevice);
    flags.deviceMemory = given(deviceMemory);
    flags.hostMemory = given(hostMemory);
    flags.outputDir = given(outputDir);
    flags.runName = given(runName);
    flags.checkpointDir = given(checkpointDir);
    flags.checkpointEvery = given(checkpointEvery);
    flags.resume = resume;
    flags.initFrom = given(initFrom);
    flags.exportPath = given(exportPath);
    flags.tracePath = given(trace);
    flags.traceSkipSteps = given(traceSkipSteps);
    flags.traceSteps = given(traceSteps);
    flags.cacheDir = given(cacheDir);
  }

  cl::opt<std::string> modelPath;
  cl::list<std::string> overrides;
  cl::opt<std::string> config;
  cl::opt<bool> printConfig;
  cl::opt<int64_t> steps;
  cl::opt<uint64_t> seed;
  cl::opt<std::string> metrics;
  cl::opt<bool> verify;
  cl::opt<int64_t> threadsPerDevice;
  cl::opt<std::string> deviceMemory, hostMemory, outputDir, runName,
      checkpointDir;
  cl::opt<int64_t> checkpointEvery;
  cl::opt<bool> resume;
  cl::opt<std::string> initFrom, exportPath, trace;
  cl::opt<int64_t> traceSkipSteps, traceSteps;
  cl::opt<std::string> cacheDir;
};

ToolFlags::ToolFlags(Tool tool)
    : meshCategory("sd mesh and batch options"),
      stepCategory("sd training-step options"),
      runCategory("sdrun options"),
      categoryList{&meshCategory, &stepCategory} {
  spec = std::make_unique<SpecOptions>(meshCategory, stepCategory);
  if (tool == Tool::Sdopt) {
    sdopt = std::make_unique<SdoptOptions>(meshCategory, stepCategory);
  } else {
    run = std::make_unique<RunOptions>(runCategory);
    categoryList.push_back(&runCategory);
  }
}

ToolFlags::~ToolFlags() = default;

::sd::RunSpecFlags ToolFlags::values() const {
  ::sd::RunSpecFlags flags;
  spec->fill(flags);
  if (sdopt)
    sdopt->fill(flags);
  if (run)
    run->fill(flags);
  return flags;
}

bool ToolFlags::printConfig() const { return run && run->printConfig; }
