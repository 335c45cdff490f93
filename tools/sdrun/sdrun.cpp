//===- sdrun.cpp - Runs training steps of an sd model on a device mesh ----===//
//
//   sdrun MODEL.mlir --mesh=data:2 --batch=8 --steps=20 [--verify]
//
// Builds the model's training step, partitions it for the mesh, lowers the
// per-device program to C++ (compiled once, cached by content hash),
// initializes the parameters from their `init` attributes and a batch from
// the seed (the same global values on every mesh), and runs the steps on a
// mesh of devices in this process. See the README for the output.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/TrainProgram.h"
#include "sd/IR/SDDialect.h"
#include "sd/Passes/Passes.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Session.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>

using namespace llvm;

static cl::OptionCategory runCategory("sdrun options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"));
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
static cl::opt<int64_t> stepsFlag("steps", cl::desc("Training steps to run"),
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

int fail(const Twine &message) {
  errs() << "sdrun: error: " << message << "\n";
  return 1;
}

int fail(const absl::Status &status) {
  return fail(std::string(status.message()));
}

/// Builds, compiles and loads the step for `options`, and creates its
/// session with `initial` arguments.
absl::StatusOr<std::unique_ptr<sd::rt::TrainingSession>>
startSession(mlir::ModuleOp module, const mlir::sd::PipelineOptions &options,
             const std::vector<std::vector<float>> &initial, int threads,
             int64_t deviceBudget, int64_t hostBudget,
             mlir::sd::TrainProgram &program) {
  mlir::FailureOr<mlir::sd::TrainProgram> built =
      mlir::sd::buildTrainProgram(module, options);
  if (mlir::failed(built))
    return absl::AbortedError("the compiler reported an error");
  program = std::move(*built);
  sd::rt::CompileOptions compile;
  compile.cacheDir = cacheDirFlag;
  absl::StatusOr<sd::rt::CompiledProgram> compiled =
      sd::rt::compileProgram(program.source, compile);
  if (!compiled.ok())
    return compiled.status();
  if (!compiled->cacheHit)
    outs() << "compiled the device program in "
           << format("%.1f", compiled->compileSeconds) << " s ("
           << compiled->sourcePath << ")\n";
  absl::StatusOr<std::unique_ptr<sd::rt::LoadedProgram>> loaded =
      sd::rt::LoadedProgram::load(compiled->libraryPath);
  if (!loaded.ok())
    return loaded.status();
  sd::rt::MeshRuntimeOptions runtime;
  runtime.mesh = program.mesh;
  runtime.threadsPerDevice = threads;
  runtime.deviceMemoryBudget = deviceBudget;
  runtime.hostMemoryBudget = hostBudget;
  absl::StatusOr<std::unique_ptr<sd::rt::TrainingSession>> session =
      sd::rt::TrainingSession::create(runtime, program.spec,
                                      std::move(*loaded));
  if (!session.ok())
    return session.status();
  if (absl::Status status = (*session)->setArguments(initial); !status.ok())
    return status;
  return session;
}

std::string humanBytes(int64_t bytes) { return sd::rt::formatBytes(bytes); }

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "sdrun: train an sd model on a device mesh\n");

  mlir::sd::PipelineOptions options;
  options.mesh = meshFlag;
  options.devices = devicesFlag;
  options.rules = rulesFlag;
  options.batch = batchFlag;
  options.train = true;
  mlir::sd::DifferentiateOptions &train = options.differentiate;
  train.remat = rematFlag;
  train.namesSaved.assign(namesSavedFlag.begin(), namesSavedFlag.end());
  train.namesOffloaded.assign(namesOffloadedFlag.begin(),
                              namesOffloadedFlag.end());
  train.learningRate = lrFlag;
  train.warmupSteps = warmupFlag;

  if (stepsFlag < 1)
    return fail("--steps must be at least 1, not " + Twine(stepsFlag));
  sd::MeshSpec mesh({sd::MeshAxis{"data", 1, 1}});
  if (!meshFlag.empty()) {
    sd::MeshOptions meshOptions;
    if (devicesFlag > 0)
      meshOptions.devices = devicesFlag.getValue();
    absl::StatusOr<sd::MeshSpec> parsed =
        sd::parseMesh(meshFlag, "", meshOptions);
    if (!parsed.ok())
      return fail(parsed.status());
    mesh = *parsed;
  }
  if (devicesFlag > 0 && devicesFlag != mesh.numDevices())
    return fail("mesh " + mesh.toString() + " has " +
                Twine(mesh.numDevices()) + " devices, but --devices=" +
                Twine(devicesFlag));
  if (perDeviceBatchFlag != 0.0) {
    if (batchFlag != 0)
      return fail("give --batch or --per-device-batch, not both");
    double global = perDeviceBatchFlag * static_cast<double>(mesh.numDevices());
    if (!(global >= 1.0) || std::fabs(global - std::round(global)) > 1e-9)
      return fail(formatv("--per-device-batch={0} × {1} devices = {2} is not "
                          "a whole, positive global batch",
                          shortDouble(perDeviceBatchFlag), mesh.numDevices(),
                          shortDouble(global)));
    options.batch = static_cast<int64_t>(std::llround(global));
  }
  if (options.batch < 0)
    return fail("--batch must be positive, not " + Twine(options.batch));
  int64_t deviceBudget = 0, hostBudget = 0;
  if (!deviceMemoryFlag.empty()) {
    std::optional<int64_t> size = sd::rt::parseByteSize(deviceMemoryFlag);
    if (!size)
      return fail("--device-memory='" + deviceMemoryFlag +
                  "' is not a size (e.g. 512MiB, 2GB)");
    deviceBudget = *size;
  }
  if (!hostMemoryFlag.empty()) {
    std::optional<int64_t> size = sd::rt::parseByteSize(hostMemoryFlag);
    if (!size)
      return fail("--host-memory='" + hostMemoryFlag +
                  "' is not a size (e.g. 512MiB, 2GB)");
    hostBudget = *size;
  }
  if (threadsFlag < 0)
    return fail("--threads-per-device must not be negative");

  mlir::DialectRegistry registry;
  registry.insert<mlir::sd::SDDialect, mlir::func::FuncDialect>();
  mlir::func::registerInlinerExtension(registry);
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
  auto failMlir = [&](const Twine &message) {
    return sawError ? 1 : fail(message);
  };
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(modelPath, sourceMgr,
                                            mlir::ParserConfig(&context));
  if (!module)
    return failMlir("could not parse '" + modelPath + "'");

  mlir::FailureOr<std::vector<std::vector<float>>> initial =
      mlir::sd::initialTrainArguments(*module, options, seedFlag);
  if (mlir::failed(initial))
    return failMlir("could not initialize the training step's arguments");

  mlir::sd::TrainProgram program;
  absl::StatusOr<std::unique_ptr<sd::rt::TrainingSession>> session =
      startSession(*module, options, *initial, threadsFlag, deviceBudget,
                   hostBudget, program);
  if (!session.ok())
    return session.status().code() == absl::StatusCode::kAborted
               ? failMlir("could not build the training step")
               : fail(session.status());
  sd::rt::MeshRuntime &runtime = (*session)->runtime();
  int64_t params = 0;
  for (size_t i = 0; i < program.spec.arguments.size(); ++i)
    if (program.spec.arguments[i].kind == sd::rt::ArgumentKind::Parameter)
      params += sd::rt::numElements(program.spec.arguments[i].globalShape);
  outs() << "sdrun: " << modelPath << ", " << params << " parameters, batch "
         << program.batch << ", mesh " << mesh.toString() << " ("
         << runtime.numDevices() << " devices × "
         << runtime.threadsPerDevice() << " threads), remat " << rematFlag
         << "\n";

  std::unique_ptr<ToolOutputFile> metrics;
  if (!metricsFlag.empty()) {
    std::error_code error;
    metrics = std::make_unique<ToolOutputFile>(metricsFlag, error, llvm::sys::fs::OF_None);
    if (error)
      return fail("cannot write '" + metricsFlag + "': " + error.message());
    // The steps that ran are kept even when a later one fails.
    metrics->keep();
  }

  std::vector<double> losses;
  double totalSeconds = 0;
  for (int64_t step = 0; step < stepsFlag; ++step) {
    absl::StatusOr<sd::rt::TrainingSession::StepResult> result =
        (*session)->step(step);
    if (!result.ok())
      return fail(result.status());
    losses.push_back(result->loss);
    totalSeconds += result->seconds;
    double samples = program.batch / result->seconds;
    double gflops = program.modelFlops / result->seconds / 1e9;
    outs() << format("step %3lld  loss %.6f  %7.3f s  %7.2f samples/s  "
                     "%7.1f GFLOP/s\n",
                     static_cast<long long>(step + 1), result->loss,
                     result->seconds, samples, gflops);
    outs().flush();
    if (metrics) {
      json::Object line{
          {"step", step + 1},
          {"loss", result->loss},
          {"step_time_s", result->seconds},
          {"samples_per_s", samples},
          {"model_flops", program.modelFlops},
          {"achieved_gflops", gflops},
          {"peak_device_bytes", (*session)->peakDeviceBytes()},
          {"peak_host_bytes", (*session)->peakHostBytes()},
          {"comm_bytes_per_device", (*session)->lastStepCommBytes()},
      };
      metrics->os() << json::Value(std::move(line)) << "\n";
      metrics->os().flush();
    }
  }
  outs() << format("done: %lld steps in %.2f s, loss %.6f -> %.6f\n",
                   static_cast<long long>(stepsFlag.getValue()), totalSeconds,
                   losses.front(), losses.back());
  outs() << "per device: peak device memory "
         << humanBytes((*session)->peakDeviceBytes()) << ", peak host memory "
         << humanBytes((*session)->peakHostBytes()) << ", sent "
         << humanBytes((*session)->lastStepCommBytes())
         << " per step in collectives";
  if (!meshFlag.empty())
    outs() << " (sdopt predicts " << humanBytes(program.predictedCommBytes)
           << ")";
  outs() << "\n";
  // sd.offload / sd.reload traffic (remat policies with offload).
  int64_t offloaded = 0, reloaded = 0;
  for (int64_t d = 0; d < runtime.numDevices(); ++d) {
    offloaded = std::max(offloaded, runtime.device(d).counters().offloadBytes);
    reloaded = std::max(reloaded, runtime.device(d).counters().reloadBytes);
  }
  if (offloaded + reloaded > 0)
    outs() << "per device: moved " << humanBytes(offloaded / stepsFlag)
           << " to host memory and " << humanBytes(reloaded / stepsFlag)
           << " back per step (sd.offload, sd.reload)\n";
  if (!verifyFlag)
    return 0;

  // The same steps on one device.
  mlir::sd::PipelineOptions single = options;
  single.mesh.clear();
  single.devices = 0;
  mlir::sd::TrainProgram singleProgram;
  // 0: all the cores OpenMP sees for the one device.
  int allThreads = 0;
  absl::StatusOr<std::unique_ptr<sd::rt::TrainingSession>> reference =
      startSession(*module, single, *initial, allThreads, 0, 0, singleProgram);
  if (!reference.ok())
    return reference.status().code() == absl::StatusCode::kAborted
               ? failMlir("could not build the single-device training step")
               : fail(reference.status());
  // NaN or infinity anywhere fails the comparison.
  bool finite = true;
  double worstLoss = 0;
  for (int64_t step = 0; step < stepsFlag; ++step) {
    absl::StatusOr<sd::rt::TrainingSession::StepResult> result =
        (*reference)->step(step);
    if (!result.ok())
      return fail(result.status());
    finite &= std::isfinite(losses[step]) && std::isfinite(result->loss);
    double diff = std::fabs(losses[step] - result->loss) /
                  std::max(std::fabs(result->loss), 1e-30);
    worstLoss = std::max(worstLoss, diff);
  }
  absl::StatusOr<sd::rt::ParameterComparison> comparison =
      sd::rt::compareParameters(**session, **reference);
  if (!comparison.ok())
    return fail(comparison.status().code() == absl::StatusCode::kInvalidArgument
                    ? "--verify: " + std::string(comparison.status().message())
                    : std::string(comparison.status().message()));
  finite &= comparison->finite;
  double worstParam = comparison->relativeDifference;
  std::string worstName =
      comparison->worstTensor.empty() ? "all equal" : comparison->worstTensor;
  if (!finite) {
    outs() << "verify: FAILED: a loss or parameter is not finite\n";
    return 1;
  }
  bool ok = worstLoss <= 1e-4 && worstParam <= 1e-4;
  outs() << format("verify: largest relative difference to one device: "
                   "loss %.3g, parameters %.3g (%s): %s\n",
                   worstLoss, worstParam, worstName.c_str(),
                   ok ? "ok" : "FAILED (above 1e-4)");
  return ok ? 0 : 1;
}
