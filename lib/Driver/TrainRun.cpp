//===- TrainRun.cpp - A training run: steps, checkpoints, telemetry -------===//
//
// The body of `sdrun`: everything after its flags and config file are
// resolved into TrainRunOptions.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/TrainRun.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Safetensors.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Session.h"
#include "sd/Runtime/Trace.h"
#include "sd/Telemetry/LossPlot.h"
#include "sd/Telemetry/MetricsCsv.h"
#include "sd/Telemetry/Progress.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::sd;
using llvm::errs;
using llvm::format;
using llvm::formatv;
using llvm::outs;
using llvm::Twine;

namespace rt = ::sd::rt;
namespace ckpt = ::sd::ckpt;
namespace telemetry = ::sd::telemetry;

namespace {

int fail(const Twine &message) {
  outs().flush();
  errs() << "sdrun: error: " << message << "\n";
  return 1;
}

int fail(const absl::Status &status) {
  return fail(std::string(status.message()));
}

void warn(const Twine &message) {
  outs().flush();
  errs() << "sdrun: warning: " << message << "\n";
}

/// "1 key", "3 keys".
std::string count(size_t n, llvm::StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

/// Fails when the directory `path` would be written into does not exist, so
/// that a bad output path is reported before the run rather than after it.
absl::Status checkOutputPath(const std::string &path, llvm::StringRef flag) {
  if (path.empty())
    return absl::OkStatus();
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (llvm::sys::fs::is_directory(path))
    return absl::InvalidArgumentError(
        (flag + "='" + path + "' is a directory").str());
  if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
    return absl::InvalidArgumentError((flag + "='" + path + "': directory '" +
                                       parent + "' does not exist")
                                          .str());
  return absl::OkStatus();
}

/// Keeps the lines of a JSON-lines metrics file whose "step" is at most
/// `lastStep` (a resumed run continues the file; the steps after its
/// checkpoint belong to the abandoned part of the earlier run). Written to
/// a temporary file and renamed.
absl::Status trimMetricsLines(const std::string &path, int64_t lastStep) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return absl::OkStatus();
  std::string kept;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
    if (!value) {
      llvm::consumeError(value.takeError());
      continue;
    }
    const llvm::json::Object *object = value->getAsObject();
    std::optional<int64_t> step =
        object ? object->getInteger("step") : std::nullopt;
    if (step && *step <= lastStep)
      kept += (line + "\n").str();
  }
  std::string tmp = path + ".tmp";
  {
    std::error_code error;
    llvm::raw_fd_ostream os(tmp, error);
    if (error)
      return absl::InternalError("cannot write '" + tmp +
                                 "': " + error.message());
    os << kept;
  }
  if (std::error_code error = llvm::sys::fs::rename(tmp, path))
    return absl::InternalError("cannot rename '" + tmp + "' to '" + path +
                               "': " + error.message());
  return absl::OkStatus();
}

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Builds, compiles and loads the step for `pipeline` and creates its
/// session (without arguments). Nullptr after an error was printed.
std::unique_ptr<rt::TrainingSession>
startSession(ModuleOp module, const TrainRunOptions &options,
             const PipelineOptions &pipeline, int threads,
             int64_t deviceBudget, int64_t hostBudget, TrainProgram &program,
             llvm::function_ref<bool()> compilerFailed) {
  FailureOr<TrainProgram> built = buildTrainProgram(module, pipeline);
  if (failed(built)) {
    if (!compilerFailed())
      fail("could not build the training step");
    return nullptr;
  }
  program = std::move(*built);
  rt::CompileOptions compile;
  compile.cacheDir = options.cacheDir;
  absl::StatusOr<rt::CompiledProgram> compiled =
      rt::compileProgram(program.source, compile);
  if (!compiled.ok()) {
    fail(compiled.status());
    return nullptr;
  }
  if (!compiled->cacheHit)
    outs() << "compiled the device program in "
           << format("%.1f", compiled->compileSeconds) << " s ("
           << compiled->sourcePath << ")\n";
  absl::StatusOr<std::unique_ptr<rt::LoadedProgram>> loaded =
      rt::LoadedProgram::load(compiled->libraryPath);
  if (!loaded.ok()) {
    fail(loaded.status());
    return nullptr;
  }
  rt::MeshRuntimeOptions runtime;
  runtime.mesh = program.mesh;
  runtime.threadsPerDevice = threads;
  runtime.deviceMemoryBudget = deviceBudget;
  runtime.hostMemoryBudget = hostBudget;
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> session =
      rt::TrainingSession::create(runtime, program.spec, std::move(*loaded));
  if (!session.ok()) {
    fail(session.status());
    return nullptr;
  }
  return std::move(*session);
}

/// The model's file name and a hash of its text: what a checkpoint records
/// to say which model it belongs to.
std::string modelIdentifier(const std::string &path) {
  std::string id = llvm::sys::path::filename(path).str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (buffer)
    id += " xxh3:" + llvm::utohexstr(llvm::xxh3_64bits(
                          llvm::arrayRefFromStringRef((*buffer)->getBuffer())));
  return id;
}

/// The optimizer's hyperparameters, as a checkpoint records them.
std::map<std::string, double> hyperparameters(const PipelineOptions &options) {
  const BuildTrainStepOptions &o = options.training.step;
  return {{"learning_rate", o.learningRate},
          {"warmup_steps", static_cast<double>(o.warmupSteps)},
          {"adam_b1", o.beta1},
          {"adam_b2", o.beta2},
          {"adam_eps", o.epsilon},
          {"adam_weight_decay", o.weightDecay},
          {"max_grad_norm", o.maxGradNorm}};
}

/// Replaces the parameters of `values` (the step's arguments in `spec`'s
/// order) by the tensors of the same name in a safetensors file.
absl::Status initFromSafetensors(const std::string &path,
                                 const rt::ProgramSpec &spec,
                                 std::vector<std::vector<float>> &values) {
  absl::StatusOr<ckpt::SafetensorsFile> file = ckpt::readSafetensors(path);
  if (!file.ok())
    return file.status();
  std::map<std::string, const ckpt::SafetensorsTensor *> byName;
  for (const ckpt::SafetensorsTensor &tensor : file->tensors)
    byName[tensor.name] = &tensor;
  std::vector<std::string> missing;
  int64_t loaded = 0;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (arg.kind != rt::ArgumentKind::Parameter)
      continue;
    auto it = byName.find(arg.name);
    if (it == byName.end()) {
      missing.push_back(arg.name);
      continue;
    }
    const ckpt::SafetensorsTensor &tensor = *it->second;
    if (tensor.shape != arg.globalShape)
      return absl::InvalidArgumentError(
          (path + ": tensor '" + arg.name + "' has shape [" +
           llvm::join(llvm::map_range(tensor.shape,
                                      [](int64_t d) { return std::to_string(d); }),
                      ", ") +
           "], but the model's is [" +
           llvm::join(llvm::map_range(arg.globalShape,
                                      [](int64_t d) { return std::to_string(d); }),
                      ", ") +
           "]"));
    values[i] = tensor.values;
    byName.erase(it);
    ++loaded;
  }
  if (loaded == 0)
    return absl::InvalidArgumentError(
        path + " has none of the model's parameters (such as '" +
        (missing.empty() ? std::string() : missing.front()) +
        "'); tensors are matched by name");
  outs() << "initialized " << count(loaded, "parameter") << " from " << path
         << "\n";
  if (!missing.empty())
    warn(Twine(path) + " has no tensor for " + count(missing.size(), "parameter") +
         ", which keep their seeded values: " + llvm::join(missing, ", "));
  if (!byName.empty()) {
    std::vector<std::string> unused;
    for (const auto &[name, tensor] : byName)
      unused.push_back(name);
    warn(Twine(path) + " has " + count(unused.size(), "tensor") +
         " the model does not have: " + llvm::join(unused, ", "));
  }
  return absl::OkStatus();
}

/// Writes the parameters of `session` (gathered) to a safetensors file.
absl::Status exportParameters(rt::TrainingSession &session,
                              const std::string &path, int64_t step,
                              const std::string &model) {
  std::vector<std::vector<float>> values;
  std::vector<ckpt::SafetensorsTensorView> tensors;
  const rt::ProgramSpec &spec = session.spec();
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (arg.kind != rt::ArgumentKind::Parameter)
      continue;
    absl::StatusOr<std::vector<float>> gathered =
        session.gatherArgument(static_cast<int64_t>(i));
    if (!gathered.ok())
      return gathered.status();
    values.push_back(std::move(*gathered));
    tensors.push_back({arg.name, arg.globalShape, values.back().data()});
  }
  std::map<std::string, std::string> metadata{
      {"format", "pt"}, {"step", std::to_string(step)}, {"model", model}};
  return ckpt::writeSafetensors(path, tensors, metadata).status();
}

/// (step, loss) of the rows of a metrics CSV up to `lastStep`.
std::vector<std::pair<int64_t, double>>
readLossHistory(const std::string &path, int64_t lastStep) {
  std::vector<std::pair<int64_t, double>> points;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return points;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : llvm::drop_begin(lines)) {
    llvm::SmallVector<llvm::StringRef> fields;
    line.split(fields, ',');
    int64_t step;
    double loss;
    if (fields.size() < 3 || fields[1].getAsInteger(10, step) ||
        fields[2].getAsDouble(loss) || step > lastStep)
      continue;
    points.emplace_back(step, loss);
  }
  return points;
}

} // namespace

int mlir::sd::runTraining(ModuleOp module, const TrainRunOptions &options,
                          llvm::function_ref<bool()> compilerFailed) {
  if (!options.runDir.empty())
    if (std::error_code error =
            llvm::sys::fs::create_directories(options.runDir))
      return fail("cannot create '" + options.runDir + "': " + error.message());
  for (auto [path, flag] :
       {std::pair<const std::string &, llvm::StringRef>{options.exportPath,
                                                        "--export"},
        {options.tracePath, "--trace"},
        {options.metricsPath, "--metrics"}})
    if (absl::Status status = checkOutputPath(path, flag); !status.ok())
      return fail(status);
  const bool checkpointing = !options.checkpointDir.empty();
  if (options.resume && !checkpointing)
    return fail("--resume needs --checkpoint-dir");
  if (options.resume && !options.initFrom.empty())
    return fail("give --resume or --init-from, not both");
  // One run at a time writes into a checkpoint directory: the lock's file
  // descriptor stays open (and locked) until the process exits.
  if (checkpointing) {
    if (std::error_code error =
            llvm::sys::fs::create_directories(options.checkpointDir))
      return fail("cannot create '" + options.checkpointDir +
                  "': " + error.message());
    std::string lock = options.checkpointDir + "/.lock";
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0)
      return fail("'" + options.checkpointDir +
                  "' is in use by another sdrun (" + lock + " is locked)");
  }
  // The checkpoint to resume from, loaded (every checksum verified) before
  // the step is compiled, so a damaged checkpoint is reported at once; a
  // fresh run does not write into a directory with another run's
  // checkpoints.
  std::string resumeFrom;
  std::optional<ckpt::LoadedCheckpoint> loaded;
  if (checkpointing) {
    absl::StatusOr<std::vector<std::string>> existing =
        ckpt::listCheckpoints(options.checkpointDir);
    if (!existing.ok())
      return fail(existing.status());
    if (options.resume) {
      if (existing->empty())
        return fail("--resume: no complete checkpoint in '" +
                    options.checkpointDir + "'");
      resumeFrom = existing->back();
      absl::StatusOr<ckpt::LoadedCheckpoint> read =
          ckpt::loadCheckpoint(resumeFrom);
      if (!read.ok()) {
        if (absl::IsDataLoss(read.status()) && existing->size() > 1)
          return fail(std::string(read.status().message()) +
                      "; to resume from the checkpoint before it (" +
                      (*existing)[existing->size() - 2] + "), remove '" +
                      resumeFrom + "'");
        return fail(read.status());
      }
      loaded = std::move(*read);
    } else if (!existing->empty()) {
      return fail("'" + options.checkpointDir + "' already holds checkpoints (" +
                  existing->back() +
                  "); pass --resume to continue that run, or choose another "
                  "--checkpoint-dir");
    }
  }

  TrainProgram program;
  std::unique_ptr<rt::TrainingSession> session = startSession(
      module, options, options.pipeline, options.threadsPerDevice,
      options.deviceMemoryBudget, options.hostMemoryBudget, program,
      compilerFailed);
  if (!session)
    return 1;
  const rt::ProgramSpec &spec = program.spec;
  rt::MeshRuntime &runtime = session->runtime();
  const std::string model = modelIdentifier(options.modelPath);

  int64_t params = 0;
  for (const rt::ArgumentSpec &arg : spec.arguments)
    if (arg.kind == rt::ArgumentKind::Parameter)
      params += rt::numElements(arg.globalShape);
  outs() << "sdrun: " << options.modelPath << ", " << params
         << " parameters, batch " << program.batch << ", mesh "
         << program.mesh.toString() << " ("
         << count(runtime.numDevices(), "device") << " × "
         << count(runtime.threadsPerDevice(), "thread") << "), remat "
         << ::sd::rematPolicyName(options.pipeline.training.remat.policy)
         << "\n";
  for (const std::string &note : options.notes)
    outs() << note << "\n";
  // Where the run starts: a checkpoint, or seeded values (and a
  // safetensors file's parameters).
  std::vector<std::vector<float>> start;
  int64_t firstStep = 0;
  uint64_t seed = options.seed;
  if (loaded) {
    firstStep = loaded->meta.step;
    seed = loaded->meta.seed;
    // The batch is drawn from the seed; a run resumed with another global
    // batch (per_device_batch_size on a larger mesh) draws it again.
    rt::ProgramSpec restored;
    std::vector<size_t> redrawn;
    std::string redrawNote;
    for (size_t i = 0; i < spec.arguments.size(); ++i) {
      const rt::ArgumentSpec &arg = spec.arguments[i];
      const ckpt::LoadedTensor *saved = loaded->find(arg.name);
      if (arg.kind == rt::ArgumentKind::Input &&
          (!saved || saved->globalShape != arg.globalShape))
        redrawn.push_back(i);
      else
        restored.arguments.push_back(arg);
    }
    absl::StatusOr<std::vector<std::vector<float>>> values =
        ckpt::argumentsFromCheckpoint(*loaded, restored);
    if (!values.ok())
      return fail(values.status());
    if (redrawn.empty()) {
      start = std::move(*values);
    } else {
      FailureOr<std::vector<std::vector<float>>> initial =
          initialTrainArguments(module, options.pipeline, seed);
      if (failed(initial))
        return compilerFailed() ? 1
                                : fail("could not draw the training batch");
      start = std::move(*initial);
      size_t next = 0;
      for (size_t i = 0; i < spec.arguments.size(); ++i)
        if (!llvm::is_contained(redrawn, i))
          start[i] = std::move((*values)[next++]);
      redrawNote = "the checkpoint's batch does not have this run's shape: "
                   "drew a batch of " +
                   std::to_string(program.batch) +
                   " from the checkpoint's seed " + std::to_string(seed) +
                   "\n";
    }
    std::vector<std::string> changed;
    for (const auto &[key, value] : hyperparameters(options.pipeline)) {
      auto it = loaded->meta.hyperparameters.find(key);
      if (it != loaded->meta.hyperparameters.end() && it->second != value)
        changed.push_back(formatv("{0} {1} -> {2}", key,
                                  format("%g", it->second), format("%g", value))
                              .str());
    }
    if (!changed.empty())
      warn("resuming with other optimizer settings than the checkpoint's "
           "(the run is then not the one that was interrupted): " +
           llvm::join(changed, ", "));
    if (options.seed != loaded->meta.seed)
      warn(formatv("the run continues with the checkpoint's seed {0}, not {1}",
                   loaded->meta.seed, options.seed));
    if (loaded->meta.model != model)
      warn("the checkpoint was written for model '" + loaded->meta.model +
           "', this is '" + model + "'");
    std::string savedMesh = loaded->mesh.toString();
    std::string resumeNote = "resumed from " + resumeFrom + " (step " +
                 std::to_string(firstStep) + ", saved on mesh " + savedMesh;
    if (savedMesh != program.mesh.toString())
      resumeNote += ", resharded onto " + program.mesh.toString();
    outs() << resumeNote << ")\n" << redrawNote;
  } else {
    FailureOr<std::vector<std::vector<float>>> initial =
        initialTrainArguments(module, options.pipeline, seed);
    if (failed(initial))
      return compilerFailed()
                 ? 1
                 : fail("could not initialize the training step's arguments");
    start = std::move(*initial);
    if (!options.initFrom.empty())
      if (absl::Status status = initFromSafetensors(options.initFrom, spec, start);
          !status.ok())
        return fail(status);
  }
  if (absl::Status status = session->setArguments(start); !status.ok())
    return fail(status);

  if (firstStep >= options.steps) {
    outs() << "nothing to run: the checkpoint is at step " << firstStep
           << ", max_train_steps is " << options.steps << "\n";
  }

  // Outputs of the run.
  std::unique_ptr<llvm::ToolOutputFile> metrics;
  if (!options.metricsPath.empty()) {
    if (options.resume)
      if (absl::Status status = trimMetricsLines(options.metricsPath, firstStep);
          !status.ok())
        return fail(status);
    std::error_code error;
    metrics = std::make_unique<llvm::ToolOutputFile>(
        options.metricsPath, error,
        options.resume ? llvm::sys::fs::OF_Append : llvm::sys::fs::OF_None);
    if (error)
      return fail("cannot write '" + options.metricsPath +
                  "': " + error.message());
    // The steps that ran are kept even when a later one fails.
    metrics->keep();
  }
  telemetry::MetricsCsv csv;
  const std::vector<std::string> csvColumns = {
      "loss", "step_time_s", "samples_per_s", "achieved_gflops",
      "comm_bytes_per_device", "peak_device_bytes"};
  if (!options.runDir.empty()) {
    std::string path = (options.runDir + "/metrics.csv");
    if (absl::Status status =
            csv.open(path, csvColumns, options.resume, firstStep);
        !status.ok())
      return fail(status);
  }

  outs().flush();
  telemetry::ProgressReporter progress(
      options.steps, firstStep, std::cout,
      telemetry::isInteractiveTerminal(fileno(stdout)));
  auto print = [&](const std::string &line) { progress.printAbove(line); };
  // The trace covers a window of this run's steps (MaxDiffusion's
  // skip_first_n_steps_for_profiler and profiler_steps): a span per kernel
  // is too much to keep for a whole long run.
  const bool tracing = !options.tracePath.empty();
  const int64_t traceBegin = firstStep + options.traceSkipSteps;
  const int64_t traceEnd = std::min(options.steps, traceBegin + options.traceSteps);
  auto writeTrace = [&]() -> absl::Status {
    runtime.enableTracing(false);
    absl::StatusOr<int64_t> events =
        rt::writeChromeTrace(runtime, options.tracePath);
    if (!events.ok())
      return events.status();
    std::string window =
        traceBegin < traceEnd
            ? formatv("steps {0}-{1}", traceBegin + 1, traceEnd).str()
            : std::string("no step: the run ended before the window");
    outs() << "trace: " << options.tracePath << " (" << window << ", "
           << *events << " events; open it in https://ui.perfetto.dev)\n";
    return absl::OkStatus();
  };
  // A failed step still leaves its trace (and the steps before it).
  auto failStep = [&](const absl::Status &status) {
    progress.finish();
    if (tracing && runtime.tracingEnabled())
      if (absl::Status written = writeTrace(); !written.ok())
        warn(std::string(written.message()));
    return fail(status);
  };

  auto saveCheckpoint = [&](int64_t stepsTaken) -> absl::Status {
    Clock::time_point begin = Clock::now();
    ckpt::CheckpointMeta meta;
    meta.step = stepsTaken;
    meta.seed = seed;
    meta.dataSeed = seed;
    // The batch is drawn once from the seed: every step reads the same one.
    meta.dataPosition = stepsTaken;
    meta.model = model;
    meta.hyperparameters = hyperparameters(options.pipeline);
    if (absl::Status status =
            ckpt::saveCheckpoint(options.checkpointDir, *session, meta);
        !status.ok())
      return status;
    runtime.traceHostSpan("checkpoint", begin, Clock::now());
    std::string path =
        options.checkpointDir + "/" + ckpt::stepDirectoryName(stepsTaken);
    int64_t files = 0;
    uint64_t bytes = 0;
    std::error_code error;
    for (llvm::sys::fs::directory_iterator it(path, error), end;
         it != end && !error; it.increment(error)) {
      llvm::ErrorOr<llvm::sys::fs::basic_file_status> status = it->status();
      if (status) {
        ++files;
        bytes += status->getSize();
      }
    }
    print(formatv("checkpoint: step {0} -> {1} ({2} files, {3}, {4:f2} s)",
                  stepsTaken, path, files,
                  rt::formatBytes(static_cast<int64_t>(bytes)),
                  secondsSince(begin))
              .str());
    return absl::OkStatus();
  };

  std::vector<double> losses;
  // The loss curve of the whole run: a resumed run's CSV holds the steps
  // before the checkpoint.
  std::vector<std::pair<int64_t, double>> curve;
  if (csv.isOpen() && options.resume)
    curve = readLossHistory(csv.path(), firstStep);
  double totalSeconds = 0;
  int64_t lastCheckpoint = firstStep;
  for (int64_t step = firstStep; step < options.steps; ++step) {
    if (tracing && step == traceBegin)
      runtime.enableTracing(true);
    Clock::time_point begin = Clock::now();
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        session->step(step);
    if (!result.ok())
      return failStep(result.status());
    runtime.traceHostSpan("step " + std::to_string(step + 1), begin,
                          Clock::now());
    losses.push_back(result->loss);
    curve.emplace_back(step + 1, result->loss);
    totalSeconds += result->seconds;
    double samples = program.batch / result->seconds;
    double gflops = program.modelFlops / result->seconds / 1e9;
    telemetry::StepExtras extras;
    extras.samplesPerSecond = samples;
    extras.gflopsPerSecond = gflops;
    progress.update(step + 1, result->loss, result->seconds, extras);
    if (metrics) {
      llvm::json::Object line{
          {"step", step + 1},
          {"loss", result->loss},
          {"step_time_s", result->seconds},
          {"samples_per_s", samples},
          {"model_flops", program.modelFlops},
          {"achieved_gflops", gflops},
          {"peak_device_bytes", session->peakDeviceBytes()},
          {"peak_host_bytes", session->peakHostBytes()},
          {"comm_bytes_per_device", session->lastStepCommBytes()},
      };
      metrics->os() << llvm::json::Value(std::move(line)) << "\n";
      metrics->os().flush();
    }
    if (csv.isOpen())
      if (absl::Status status = csv.write(
              step + 1,
              {result->loss, result->seconds, samples, gflops,
               static_cast<double>(session->lastStepCommBytes()),
               static_cast<double>(session->peakDeviceBytes())});
          !status.ok())
        return failStep(status);
    bool last = step + 1 == options.steps;
    if (checkpointing && !last && options.checkpointEvery > 0 &&
        (step + 1) % options.checkpointEvery == 0) {
      if (absl::Status status = saveCheckpoint(step + 1); !status.ok())
        return failStep(status);
      lastCheckpoint = step + 1;
    }
    if (tracing && step + 1 == traceEnd)
      runtime.enableTracing(false);
  }
  progress.finish();
  std::cout.flush();
  int64_t endStep = std::max(firstStep, options.steps);
  if (checkpointing && lastCheckpoint != endStep)
    if (absl::Status status = saveCheckpoint(endStep); !status.ok())
      return fail(status);

  if (!losses.empty()) {
    outs() << "done: " << count(losses.size(), "step")
           << format(" in %.2f s, loss %.6f -> %.6f\n", totalSeconds,
                     losses.front(), losses.back());
    outs() << "per device: peak device memory "
           << rt::formatBytes(session->peakDeviceBytes())
           << ", peak host memory "
           << rt::formatBytes(session->peakHostBytes()) << ", sent "
           << rt::formatBytes(session->lastStepCommBytes())
           << " per step in collectives";
    if (!options.pipeline.mesh.empty())
      outs() << " (sdopt predicts "
             << rt::formatBytes(program.predictedCommBytes) << ")";
    outs() << "\n";
    // sd.offload / sd.reload traffic (remat policies with offload).
    int64_t offloaded = 0, reloaded = 0;
    for (int64_t d = 0; d < runtime.numDevices(); ++d) {
      offloaded =
          std::max(offloaded, runtime.device(d).counters().offloadBytes);
      reloaded = std::max(reloaded, runtime.device(d).counters().reloadBytes);
    }
    int64_t ran = static_cast<int64_t>(losses.size());
    if (offloaded + reloaded > 0)
      outs() << "per device: moved " << rt::formatBytes(offloaded / ran)
             << " to host memory and " << rt::formatBytes(reloaded / ran)
             << " back per step (sd.offload, sd.reload)\n";
  }
  if (!options.runDir.empty()) {
    std::string plot = options.runDir + "/loss.png";
    telemetry::LossPlotOptions plotOptions;
    plotOptions.runName = options.runName;
    if (absl::Status status = telemetry::writeLossPlot(plot, curve, plotOptions);
        !status.ok())
      return fail(status);
    outs() << "metrics: " << options.runDir << "/metrics.csv, " << plot
           << "\n";
  }
  if (tracing)
    if (absl::Status status = writeTrace(); !status.ok())
      return fail(status);
  if (!options.exportPath.empty()) {
    if (absl::Status status =
            exportParameters(*session, options.exportPath, endStep, model);
        !status.ok())
      return fail(status);
    outs() << "exported the parameters to " << options.exportPath << "\n";
  }
  if (!options.verify)
    return 0;
  if (losses.empty()) {
    outs() << "verify: no steps ran, nothing to compare\n";
    return 0;
  }

  // The same steps on one device, from the same values.
  PipelineOptions single = options.pipeline;
  single.mesh.clear();
  single.dcnMesh.clear();
  single.devices = 0;
  TrainProgram singleProgram;
  // 0: all the cores OpenMP sees for the one device.
  std::unique_ptr<rt::TrainingSession> reference =
      startSession(module, options, single, /*threads=*/0, 0, 0, singleProgram,
                   compilerFailed);
  if (!reference)
    return 1;
  if (absl::Status status = reference->setArguments(start); !status.ok())
    return fail(status);
  // NaN or infinity anywhere fails the comparison.
  bool finite = true;
  double worstLoss = 0;
  for (int64_t step = firstStep; step < options.steps; ++step) {
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        reference->step(step);
    if (!result.ok())
      return fail(result.status());
    double loss = losses[step - firstStep];
    finite &= std::isfinite(loss) && std::isfinite(result->loss);
    double diff = std::fabs(loss - result->loss) /
                  std::max(std::fabs(result->loss), 1e-30);
    worstLoss = std::max(worstLoss, diff);
  }
  absl::StatusOr<rt::ParameterComparison> comparison =
      rt::compareParameters(*session, *reference);
  if (!comparison.ok())
    return fail(comparison.status().code() ==
                        absl::StatusCode::kInvalidArgument
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
  if (firstStep > 0)
    outs() << formatv("verify: steps {0}-{1} from the checkpoint's values\n",
                      firstStep + 1, options.steps);
  outs() << format("verify: largest relative difference to one device: "
                   "loss %.3g, parameters %.3g (%s): %s\n",
                   worstLoss, worstParam, worstName.c_str(),
                   ok ? "ok" : "FAILED (above 1e-4)");
  return ok ? 0 : 1;
}
