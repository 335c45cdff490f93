//===- TrainRun.cpp - A training run: steps, checkpoints, telemetry -------===//
//
// The body of `sdrun`: everything after its flags and config file are
// resolved into TrainRunOptions. The file helpers (metrics, safetensors)
// come first, then the run as a class with one member function per phase.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/TrainRun.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Safetensors.h"
#include "sd/Data/Batches.h"
#include "sd/Data/Dataset.h"
#include "sd/Driver/TrainModelFile.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/IR/SDDialect.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Session.h"
#include "sd/Runtime/Trace.h"
#include "sd/Sharding/YamlDiagnostics.h"
#include "sd/Telemetry/LossPlot.h"
#include "sd/Telemetry/MetricsCsv.h"
#include "sd/Telemetry/Progress.h"

#include "mlir/IR/Diagnostics.h"
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

#include "absl/strings/cord.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
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
namespace data = ::sd::data;

namespace {

void warn(const Twine &message) {
  outs().flush();
  errs() << "sdrun: warning: " << message << "\n";
}

/// "1 key", "3 keys", "2 batches".
std::string count(size_t n, llvm::StringRef noun) {
  if (n == 1)
    return "1 " + noun.str();
  return std::to_string(n) + " " + noun.str() +
         (noun.ends_with("s") || noun.ends_with("ch") ? "es" : "s");
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
          {"max_grad_norm", o.maxGradNorm},
          {"ema_decay", o.emaDecay}};
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
           llvm::join(
               llvm::map_range(tensor.shape,
                               [](int64_t d) { return std::to_string(d); }),
               ", ") +
           "], but the model's is [" +
           llvm::join(
               llvm::map_range(arg.globalShape,
                               [](int64_t d) { return std::to_string(d); }),
               ", ") +
           "]"));
    // A NaN or infinite weight would train silently to a NaN loss.
    auto bad =
        llvm::find_if(tensor.values, [](float v) { return !std::isfinite(v); });
    if (bad != tensor.values.end())
      return absl::InvalidArgumentError(
          path + ": tensor '" + arg.name + "' holds " + std::to_string(*bad) +
          " at element " + std::to_string(bad - tensor.values.begin()) +
          "; weights must be finite");
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
    warn(Twine(path) + " has no tensor for " +
         count(missing.size(), "parameter") +
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

/// Writes the parameters of `session` (gathered) to a safetensors file. A
/// process of a multi-process run other than 0 takes part in the gathers
/// and writes nothing.
/// With `ema`, the parameters' moving averages (the optimizer states
/// "ema NAME") under the parameters' names.
absl::Status exportParameters(rt::TrainingSession &session,
                              const std::string &path, int64_t step,
                              const std::string &model, bool ema = false) {
  std::vector<std::vector<float>> values;
  std::vector<ckpt::SafetensorsTensorView> tensors;
  const rt::ProgramSpec &spec = session.spec();
  constexpr llvm::StringLiteral kEmaPrefix = "ema ";
  values.reserve(spec.arguments.size());
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    llvm::StringRef name = arg.name;
    if (ema ? arg.kind != rt::ArgumentKind::OptimizerState ||
                  !name.consume_front(kEmaPrefix)
            : arg.kind != rt::ArgumentKind::Parameter)
      continue;
    absl::StatusOr<std::vector<float>> gathered =
        session.gatherArgument(static_cast<int64_t>(i));
    if (!gathered.ok())
      return gathered.status();
    values.push_back(std::move(*gathered));
    tensors.push_back({name.str(), arg.globalShape, values.back().data()});
  }
  if (session.runtime().process() > 0)
    return absl::OkStatus();
  std::map<std::string, std::string> metadata{
      {"format", "pt"}, {"step", std::to_string(step)}, {"model", model}};
  return ckpt::writeSafetensors(path, tensors, metadata).status();
}

/// (step, loss) of the rows of a metrics CSV up to `lastStep`.
/// (step, value) of column `column` of a metrics CSV's rows up to
/// `lastStep`, where the value is a number.
std::vector<std::pair<int64_t, double>>
readMetricsHistory(const std::string &path, llvm::StringRef column,
                   int64_t lastStep) {
  std::vector<std::pair<int64_t, double>> points;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return points;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.empty())
    return points;
  llvm::SmallVector<llvm::StringRef> header;
  lines.front().split(header, ',');
  auto it = llvm::find(header, column);
  if (it == header.end())
    return points;
  size_t index = static_cast<size_t>(it - header.begin());
  for (llvm::StringRef line : llvm::drop_begin(lines)) {
    llvm::SmallVector<llvm::StringRef> fields;
    line.split(fields, ',');
    int64_t step;
    double value;
    if (fields.size() <= index || fields[1].getAsInteger(10, step) ||
        fields[index].getAsDouble(value) || !std::isfinite(value) ||
        step > lastStep)
      continue;
    points.emplace_back(step, value);
  }
  return points;
}

} // namespace

//===----------------------------------------------------------------------===//
// Failures the run has already shown
//===----------------------------------------------------------------------===//

/// The payload that marks a reportedFailure.
static constexpr const char kReportedPayload[] = "sd.reported";

absl::Status mlir::sd::reportedFailure(const std::string &message) {
  absl::Status status = absl::AbortedError(message);
  status.SetPayload(kReportedPayload, absl::Cord());
  return status;
}

bool mlir::sd::isReportedFailure(const absl::Status &status) {
  return status.GetPayload(kReportedPayload).has_value();
}

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

namespace {

/// One training run. run() calls the phases in order; each returns the
/// run's first error, and the state the later phases need is kept in the
/// members.
class TrainRun {
public:
  TrainRun(ModuleOp module, const TrainRunOptions &options,
           const TrainRunHooks &hooks);
  ~TrainRun();

  absl::Status run();

private:
  //===--- Phases ---------------------------------------------------------===//

  /// Checks the outputs and the options before anything runs, and takes
  /// the checkpoint directory's lock.
  absl::Status preflight();
  /// Loads the checkpoint --resume continues from (every checksum
  /// verified) before the step is compiled, so that a damaged checkpoint is
  /// reported at once; refuses to start a fresh run in a directory with
  /// another run's checkpoints.
  absl::Status findCheckpoint();
  /// Builds, compiles and loads the step, and prints the run's header.
  absl::Status compile();
  /// sdrun --compile-only: builds and compiles the step, says where it is.
  absl::Status compileOnly();
  /// The starting values: the checkpoint's, or seeded ones (and a
  /// safetensors file's parameters); handed to the session.
  absl::Status restore();
  /// Opens the metrics files (a resumed run continues them).
  absl::Status openOutputs();
  /// Runs the steps, with the periodic checkpoints and the trace window,
  /// then writes the final checkpoint.
  absl::Status runSteps();
  /// The summary, the loss plot, the trace and the exported parameters.
  absl::Status writeOutputs();
  /// The summary's lines of measured and predicted collective time per
  /// set of mesh axes.
  void printCommunicationTimes();
  /// With --verify: the same steps on one device, from the same values.
  absl::Status verify();

  //===--- Helpers --------------------------------------------------------===//

  /// `message` as an error, or as a reportedFailure when the compiler has
  /// already printed a diagnostic.
  absl::Status compilerFailure(llvm::StringRef message) const;
  /// Builds, compiles and loads the step for `pipeline` and creates its
  /// session (without arguments).
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>>
  startSession(const PipelineOptions &pipeline, const DeviceSettings &settings,
               TrainProgram &built) const;
  /// eval_every: the forward @loss program on the mesh and the maker of
  /// the held-out batches (fixed noise: the same batches every time).
  absl::Status prepareEvaluation();
  /// The mean loss over the held-out batches with the current parameters.
  absl::StatusOr<double> evaluate();
  void printHeader();
  absl::Status restoreCheckpoint();
  /// Opens and checks the data set (dataset_type sd) before compiling.
  absl::Status openDataset();
  /// The step's inputs and the maker of their batches (after compile).
  absl::Status makeBatches();
  /// The stream position of step `step`'s batch.
  int64_t positionOf(int64_t step) const {
    return firstPosition + (step - firstStep) * program.batch;
  }
  /// Gives `target` the inputs of the batch at `position` (every row).
  absl::Status feedBatch(rt::TrainingSession &target,
                         const std::vector<std::vector<float>> &inputs);
  /// Writes the metrics line, the CSV row and the progress of one step.
  absl::Status recordStep(int64_t step,
                          const rt::TrainingSession::StepResult &result,
                          std::optional<double> heldout);
  absl::Status saveCheckpoint(int64_t stepsTaken);
  /// Ends the step loop after `status`: a failed step still leaves its
  /// trace (and the steps before it).
  absl::Status abandonSteps(absl::Status status);
  absl::Status writeTrace();
  void printSummary();

  ModuleOp module;
  const TrainRunOptions &options;
  const TrainRunHooks &hooks;
  /// Whether the compiler reported an error (the tool's diagnostic handler
  /// printed it).
  bool compilerReported = false;
  ScopedDiagnosticHandler diagnostics;

  const bool checkpointing;
  /// The checkpoint directory's lock, held for the run.
  int lockFd = -1;
  std::optional<ckpt::LoadedCheckpoint> resumed;

  TrainProgram program;
  std::unique_ptr<rt::TrainingSession> session;
  const std::string model;
  /// The values the steps start from (verify starts from them too), the
  /// first step's counter and the seed.
  std::vector<std::vector<float>> start;
  int64_t firstStep = 0;
  uint64_t seed;

  std::unique_ptr<llvm::ToolOutputFile> metrics;
  telemetry::MetricsCsv csv;
  std::unique_ptr<telemetry::ProgressReporter> progress;
  /// The trace covers steps [traceBegin, traceEnd) of this run.
  const bool tracing;
  int64_t traceBegin = 0, traceEnd = 0;

  /// What the steps train on: the data set (dataset_type sd), the maker of
  /// each step's inputs, and the loader thread that makes the next batch
  /// during a step. Step s reads the batch at stream position
  /// firstPosition + (s − firstStep) · batch.
  std::optional<data::DatasetIndex> datasetIndex;
  std::shared_ptr<const data::DatasetReader> dataset;
  std::unique_ptr<data::BatchMaker> batches;
  std::unique_ptr<data::Prefetcher> prefetcher;
  int64_t firstPosition = 0;
  /// Seconds the loader spent making batches, and the steps waited for it.
  double loadSeconds = 0, loadWaitSeconds = 0;
  /// eval_every: the held-out loss's program and batches, and its curve.
  std::unique_ptr<rt::TrainingSession> evalSession;
  std::unique_ptr<data::BatchMaker> heldoutBatches;
  int64_t heldoutBatchCount = 0;
  std::vector<std::pair<int64_t, double>> heldoutCurve;
  std::optional<double> lastHeldout;

  /// This run's losses, and the loss curve of the whole run (a resumed
  /// run's CSV holds the steps before the checkpoint).
  std::vector<double> losses;
  std::vector<std::pair<int64_t, double>> curve;
  double totalSeconds = 0;
};

TrainRun::TrainRun(ModuleOp module, const TrainRunOptions &options,
                   const TrainRunHooks &hooks)
    : module(module), options(options), hooks(hooks),
      // Counts the compiler's errors; the tool's handler prints them.
      diagnostics(module.getContext(),
                  [this](Diagnostic &diagnostic) {
                    if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
                      compilerReported = true;
                    return failure();
                  }),
      checkpointing(!options.checkpointDir.empty()),
      model(modelIdentifier(options.modelPath)), seed(options.seed),
      tracing(!options.tracePath.empty()) {}

TrainRun::~TrainRun() {
  if (lockFd >= 0)
    ::close(lockFd);
}

absl::Status TrainRun::run() {
  if (options.compileOnly)
    return compileOnly();
  for (absl::Status (TrainRun::*phase)() :
       {&TrainRun::preflight, &TrainRun::findCheckpoint, &TrainRun::openDataset,
        &TrainRun::compile, &TrainRun::makeBatches, &TrainRun::restore,
        &TrainRun::openOutputs, &TrainRun::runSteps,
        &TrainRun::writeOutputs, &TrainRun::verify})
    if (absl::Status status = (this->*phase)(); !status.ok())
      return status;
  return absl::OkStatus();
}

absl::Status TrainRun::compilerFailure(llvm::StringRef message) const {
  if (compilerReported)
    return reportedFailure(message.str());
  return absl::InternalError(message.str());
}

//===----------------------------------------------------------------------===//
// Preflight and the checkpoint to resume from
//===----------------------------------------------------------------------===//

absl::Status TrainRun::preflight() {
  // The model decides what it predicts; a config that says otherwise was
  // written for another model.
  if (!options.predictionType.empty())
    if (auto loss = module.lookupSymbol<func::FuncOp>("loss"))
      if (auto predicts = loss->getAttrOfType<StringAttr>(
              SDDialect::kPredictionTypeAttrName);
          predicts && predicts.getValue() != options.predictionType)
        return absl::InvalidArgumentError(
            "prediction_type " + options.predictionType +
            " is not what the model predicts: its @loss is " +
            predicts.getValue().str() + " (sdgen --prediction-type)");
  // Each device of this process is a thread team: sdopt may analyse any
  // mesh, but a run starts only as many devices as a process can hold.
  if (options.mesh.devicesPerProcess() > ::sd::kMaxDevicesPerProcess)
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh %s has %d devices in one process; sdrun runs at most %d",
        options.mesh.toString(), options.mesh.devicesPerProcess(),
        ::sd::kMaxDevicesPerProcess));
  if (!options.runDir.empty())
    if (std::error_code error =
            llvm::sys::fs::create_directories(options.runDir))
      return absl::InvalidArgumentError("cannot create '" + options.runDir +
                                        "': " + error.message());
  if (!options.exportEmaPath.empty() &&
      !(options.pipeline.training.step.emaDecay > 0))
    return absl::InvalidArgumentError(
        "--export-ema needs the step to keep EMA weights: give ema_decay "
        "(--ema-decay)");
  for (auto [path, flag] : {std::pair<const std::string &, llvm::StringRef>{
                                options.exportPath, "--export"},
                            {options.exportEmaPath, "--export-ema"},
                            {options.tracePath, "--trace"},
                            {options.metricsPath, "--metrics"}})
    if (absl::Status status = checkOutputPath(path, flag); !status.ok())
      return status;
  if (options.resume && !checkpointing)
    return absl::InvalidArgumentError("--resume needs --checkpoint-dir");
  if (options.resume && !options.initFrom.empty())
    return absl::InvalidArgumentError("give --resume or --init-from, not both");
  // Before compiling: a FIFO would block and /dev/zero never end.
  if (!options.initFrom.empty())
    if (absl::Status status =
            ::sd::checkRegularFile(options.initFrom, "--init-from file");
        !status.ok())
      return status;
  if (!checkpointing)
    return absl::OkStatus();
  // A file in the way is not a directory in use: say what it is.
  if (llvm::sys::fs::exists(options.checkpointDir) &&
      !llvm::sys::fs::is_directory(options.checkpointDir))
    return absl::InvalidArgumentError(
        "--checkpoint-dir='" + options.checkpointDir + "' is not a directory");
  // One run at a time writes into a checkpoint directory; of a
  // multi-process run, process 0 holds the lock for all.
  if (std::error_code error =
          llvm::sys::fs::create_directories(options.checkpointDir))
    return absl::InvalidArgumentError(
        "cannot create '" + options.checkpointDir + "': " + error.message());
  if (options.device.process > 0)
    return absl::OkStatus();
  std::string lock = options.checkpointDir + "/.lock";
  lockFd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd < 0 || ::flock(lockFd, LOCK_EX | LOCK_NB) != 0)
    return absl::FailedPreconditionError("'" + options.checkpointDir +
                                         "' is in use by another sdrun (" +
                                         lock + " is locked)");
  return absl::OkStatus();
}

absl::Status TrainRun::findCheckpoint() {
  if (!checkpointing)
    return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> existing =
      ckpt::listCheckpoints(options.checkpointDir);
  if (!existing.ok())
    return existing.status();
  if (!options.resume) {
    if (existing->empty())
      return absl::OkStatus();
    return absl::FailedPreconditionError(
        "'" + options.checkpointDir + "' already holds checkpoints (" +
        existing->back() +
        "); pass --resume to continue that run, or choose another "
        "--checkpoint-dir");
  }
  if (existing->empty())
    return absl::NotFoundError("--resume: no complete checkpoint in '" +
                               options.checkpointDir + "'");
  const std::string &latest = existing->back();
  absl::StatusOr<ckpt::LoadedCheckpoint> read = ckpt::loadCheckpoint(latest);
  if (!read.ok()) {
    if (absl::IsDataLoss(read.status()) && existing->size() > 1)
      return absl::DataLossError(std::string(read.status().message()) +
                                 "; to resume from the checkpoint before it (" +
                                 (*existing)[existing->size() - 2] +
                                 "), remove '" + latest + "'");
    return read.status();
  }
  // (parseManifest has checked that the directory's name and the
  // manifest's step agree: checkpoints are found and ordered by name.)
  resumed = std::move(*read);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

absl::Status TrainRun::openDataset() {
  if (options.datasetType != "sd")
    return absl::OkStatus();
  absl::StatusOr<data::DatasetIndex> index =
      data::readDatasetIndex(options.trainDataDir);
  if (!index.ok())
    return index.status();
  // Every shard's size, checksum and shapes, before anything compiles: a
  // damaged data set is one error naming the file, not a failure at some
  // step of the run.
  if (absl::Status status = data::verifyDataset(*index); !status.ok())
    return status;
  absl::StatusOr<data::DatasetReader> reader =
      data::DatasetReader::open(*index, "train");
  if (!reader.ok())
    return reader.status();
  dataset = std::make_shared<const data::DatasetReader>(std::move(*reader));
  datasetIndex = std::move(*index);
  return absl::OkStatus();
}

/// The inputs of a step or model program that sdrun feeds, by role.
static absl::StatusOr<std::vector<data::StepInput>>
stepInputs(const rt::ProgramSpec &spec) {
  std::vector<data::StepInput> inputs;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (arg.kind != rt::ArgumentKind::Input)
      continue;
    llvm::StringRef kind = llvm::StringRef(arg.name).split('.').first;
    std::optional<data::InputRole> role = data::parseInputRole(kind.str());
    if (!role)
      return absl::InvalidArgumentError("the step's input '" + arg.name +
                                        "' is not one sdrun can feed");
    inputs.push_back({i, *role, arg.name, arg.globalShape});
  }
  return inputs;
}

absl::Status TrainRun::makeBatches() {
  absl::StatusOr<std::vector<data::StepInput>> inputs =
      stepInputs(program.spec);
  if (!inputs.ok())
    return inputs.status();
  data::BatchOptions batchOptions;
  batchOptions.seed = seed;
  batchOptions.labelDropout = options.classDropoutProb;
  batchOptions.dataset = dataset;
  batchOptions.index = datasetIndex;
  // Synthetic data: a generated data set of one global batch, as the
  // model's default batch once was (fresh noise and timesteps each step).
  batchOptions.syntheticSamples = program.batch;
  absl::StatusOr<std::unique_ptr<data::BatchMaker>> maker =
      data::BatchMaker::create(std::move(*inputs), program.batch,
                               std::move(batchOptions));
  if (!maker.ok())
    return maker.status();
  batches = std::move(*maker);
  if (options.evalEvery > 0)
    if (absl::Status status = prepareEvaluation(); !status.ok())
      return status;
  if (datasetIndex)
    outs() << "data: " << datasetIndex->name << " (" << options.trainDataDir
           << "), " << dataset->size() << " training samples of "
           << data::formatShape(datasetIndex->sampleShape) << ", "
           << llvm::format("%.1f", static_cast<double>(dataset->size()) /
                                       static_cast<double>(program.batch))
           << " steps per epoch\n";
  return absl::OkStatus();
}

absl::Status TrainRun::prepareEvaluation() {
  const data::SplitInfo *split =
      datasetIndex ? datasetIndex->findSplit("heldout") : nullptr;
  if (!split || split->count == 0)
    return absl::InvalidArgumentError(
        "eval_every needs held-out samples: dataset_type sd with a non-empty "
        "'heldout' split (sddata --heldout)" +
        std::string(datasetIndex ? " ('" + options.trainDataDir + "' has none)"
                                 : ""));
  // @loss's forward program on the step's mesh, at the step's global batch.
  PipelineOptions forward = options.pipeline;
  forward.batch = program.batch;
  FailureOr<TrainProgram> built = buildModelProgram(module, forward, "loss");
  if (failed(built))
    return compilerFailure("could not build the held-out loss's program");
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> session =
      startProgramSession(*built, options.device);
  if (!session.ok())
    return session.status();
  evalSession = std::move(*session);
  std::vector<std::vector<float>> zeros;
  for (const rt::ArgumentSpec &arg : built->spec.arguments)
    zeros.emplace_back(rt::numElements(arg.globalShape), 0.0f);
  if (absl::Status status = evalSession->setArguments(zeros); !status.ok())
    return status;
  absl::StatusOr<data::DatasetReader> reader =
      data::DatasetReader::open(*datasetIndex, "heldout");
  if (!reader.ok())
    return reader.status();
  absl::StatusOr<std::vector<data::StepInput>> inputs =
      stepInputs(built->spec);
  if (!inputs.ok())
    return inputs.status();
  data::BatchOptions heldout;
  heldout.seed = seed;
  heldout.dataset =
      std::make_shared<const data::DatasetReader>(std::move(*reader));
  heldout.index = datasetIndex;
  absl::StatusOr<std::unique_ptr<data::BatchMaker>> maker =
      data::BatchMaker::create(std::move(*inputs), built->batch,
                               std::move(heldout));
  if (!maker.ok())
    return maker.status();
  heldoutBatches = std::move(*maker);
  heldoutBatchCount =
      (split->count + heldoutBatches->batch() - 1) / heldoutBatches->batch();
  outs() << "held-out loss every " << count(options.evalEvery, "step")
         << ": " << count(heldoutBatchCount, "batch") << " of "
         << heldoutBatches->batch() << " from " << split->count
         << " held-out samples, fixed noise\n";
  return absl::OkStatus();
}

absl::StatusOr<double> TrainRun::evaluate() {
  // The step's parameters, by name.
  const rt::ProgramSpec &evalSpec = evalSession->spec();
  for (size_t i = 0; i < evalSpec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = evalSpec.arguments[i];
    if (arg.kind != rt::ArgumentKind::Parameter)
      continue;
    auto it = llvm::find_if(program.spec.arguments,
                            [&](const rt::ArgumentSpec &trained) {
                              return trained.kind ==
                                         rt::ArgumentKind::Parameter &&
                                     trained.name == arg.name;
                            });
    if (it == program.spec.arguments.end())
      return absl::InternalError("the training step has no parameter '" +
                                 arg.name + "'");
    absl::StatusOr<std::vector<float>> values = session->gatherArgument(
        static_cast<int64_t>(it - program.spec.arguments.begin()));
    if (!values.ok())
      return values.status();
    if (absl::Status status =
            evalSession->setArgument(static_cast<int64_t>(i), *values);
        !status.ok())
      return status;
  }
  double sum = 0;
  for (int64_t k = 0; k < heldoutBatchCount; ++k) {
    absl::StatusOr<std::vector<std::vector<float>>> batch =
        heldoutBatches->make(k * heldoutBatches->batch());
    if (!batch.ok())
      return batch.status();
    for (size_t n = 0; n < batch->size(); ++n)
      if (absl::Status status = evalSession->setArgument(
              static_cast<int64_t>(heldoutBatches->inputs()[n].argument),
              (*batch)[n]);
          !status.ok())
        return status;
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        evalSession->step(0);
    if (!result.ok())
      return result.status();
    sum += result->loss;
  }
  return sum / static_cast<double>(heldoutBatchCount);
}

absl::Status
TrainRun::feedBatch(rt::TrainingSession &target,
                    const std::vector<std::vector<float>> &inputs) {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (absl::Status status = target.setArgument(
            static_cast<int64_t>(batches->inputs()[k].argument), inputs[k]);
        !status.ok())
      return status;
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Compile
//===----------------------------------------------------------------------===//

absl::StatusOr<std::unique_ptr<rt::TrainingSession>>
TrainRun::startSession(const PipelineOptions &pipeline,
                       const DeviceSettings &settings,
                       TrainProgram &built) const {
  FailureOr<TrainProgram> step = buildTrainProgram(module, pipeline);
  if (failed(step))
    return compilerFailure("could not build the training step");
  built = std::move(*step);
  return startProgramSession(built, settings);
}

absl::Status TrainRun::compileOnly() {
  FailureOr<TrainProgram> step = buildTrainProgram(module, options.pipeline);
  if (failed(step))
    return compilerFailure("could not build the training step");
  absl::StatusOr<rt::CompiledProgram> compiled =
      compileDeviceProgram(step->source, options.device);
  if (!compiled.ok())
    return compiled.status();
  outs() << "device program of " << options.modelPath << " (batch "
         << step->batch << ", mesh " << step->mesh.toString()
         << "): " << compiled->libraryPath
         << (compiled->cacheHit ? " (in the cache)" : "") << "\n";
  return absl::OkStatus();
}

absl::Status TrainRun::compile() {
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> started =
      startSession(options.pipeline, options.device, program);
  if (!started.ok())
    return started.status();
  session = std::move(*started);
  printHeader();
  return absl::OkStatus();
}

void TrainRun::printHeader() {
  rt::MeshRuntime &runtime = session->runtime();
  int64_t params = 0;
  for (const rt::ArgumentSpec &arg : program.spec.arguments)
    if (arg.kind == rt::ArgumentKind::Parameter)
      params += rt::numElements(arg.globalShape);
  outs() << "sdrun: " << options.modelPath << ", " << params
         << " parameters, batch " << program.batch << ", mesh "
         << program.mesh.toString() << " (";
  // One rank of an MPI job runs its process's devices.
  if (runtime.process() >= 0)
    outs() << count(program.mesh.numProcesses(), "process") << " × ";
  outs() << count(runtime.numDevices(), "device") << " × "
         << count(runtime.threadsPerDevice(), "thread") << "), remat "
         << ::sd::rematPolicyName(options.pipeline.training.remat.policy);
  // Attention is named when it is not dot_product (the default).
  if (const std::optional<TileAttentionOptions> &tile =
          options.pipeline.tileAttention) {
    outs() << ", attention " << ::sd::attentionKindName(tile->attention);
    if (tile->ulyssesShards > 0)
      outs() << " (ulysses_shards " << tile->ulyssesShards << ")";
    if (tile->minSeqLength > 0)
      outs() << " from " << tile->minSeqLength << " tokens";
  }
  outs() << "\n";
  for (const std::string &note : options.notes)
    outs() << note << "\n";
}

//===----------------------------------------------------------------------===//
// Restore
//===----------------------------------------------------------------------===//

absl::Status TrainRun::restore() {
  if (resumed) {
    if (absl::Status status = restoreCheckpoint(); !status.ok())
      return status;
  } else {
    FailureOr<std::vector<std::vector<float>>> initial =
        initialTrainArguments(module, options.pipeline, seed);
    if (failed(initial))
      return compilerFailure(
          "could not initialize the training step's arguments");
    start = std::move(*initial);
    if (!options.initFrom.empty())
      if (absl::Status status =
              initFromSafetensors(options.initFrom, program.spec, start);
          !status.ok())
        return status;
  }
  if (absl::Status status = session->setArguments(start); !status.ok())
    return status;
  if (firstStep >= options.steps)
    outs() << "nothing to run: the checkpoint is at step " << firstStep
           << ", max_train_steps is " << options.steps << "\n";
  return absl::OkStatus();
}

absl::Status TrainRun::restoreCheckpoint() {
  const rt::ProgramSpec &spec = program.spec;
  firstStep = resumed->meta.step;
  seed = resumed->meta.seed;
  // The data stream continues where the checkpoint left it, whatever this
  // run's batch; the inputs themselves are made anew for every step.
  firstPosition = resumed->meta.dataPosition;
  rt::ProgramSpec restored;
  std::vector<size_t> inputs;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    if (spec.arguments[i].kind == rt::ArgumentKind::Input)
      inputs.push_back(i);
    else
      restored.arguments.push_back(spec.arguments[i]);
  }
  absl::StatusOr<std::vector<std::vector<float>>> values =
      ckpt::argumentsFromCheckpoint(*resumed, restored);
  if (!values.ok())
    return values.status();
  start.assign(spec.arguments.size(), {});
  size_t next = 0;
  for (size_t i = 0; i < spec.arguments.size(); ++i)
    start[i] = llvm::is_contained(inputs, i)
                   ? std::vector<float>(rt::numElements(
                                            spec.arguments[i].globalShape),
                                        0.0f)
                   : std::move((*values)[next++]);
  // What differs from the run that wrote the checkpoint.
  std::vector<std::string> changed;
  for (const auto &[key, value] : hyperparameters(options.pipeline)) {
    auto it = resumed->meta.hyperparameters.find(key);
    if (it != resumed->meta.hyperparameters.end() && it->second != value)
      changed.push_back(formatv("{0} {1} -> {2}", key, format("%g", it->second),
                                format("%g", value))
                            .str());
  }
  if (!changed.empty())
    warn("resuming with other optimizer settings than the checkpoint's "
         "(the run is then not the one that was interrupted): " +
         llvm::join(changed, ", "));
  if (options.seed != resumed->meta.seed)
    warn(formatv("the run continues with the checkpoint's seed {0}, not {1}",
                 resumed->meta.seed, options.seed));
  if (resumed->meta.model != model)
    warn("the checkpoint was written for model '" + resumed->meta.model +
         "', this is '" + model + "'");
  std::string savedMesh = resumed->mesh.toString();
  std::string resumeNote = "resumed from " + resumed->path + " (step " +
                           std::to_string(firstStep) + ", saved on mesh " +
                           savedMesh;
  if (savedMesh != program.mesh.toString())
    resumeNote += ", resharded onto " + program.mesh.toString();
  outs() << resumeNote << ")\n";
  if (datasetIndex)
    outs() << "data: continuing at sample " << firstPosition << " of the "
           << "stream (epoch " << batches->epochOf(firstPosition) << ")\n";
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// The steps and their checkpoints
//===----------------------------------------------------------------------===//

absl::Status TrainRun::openOutputs() {
  if (!options.metricsPath.empty()) {
    if (options.resume)
      if (absl::Status status =
              trimMetricsLines(options.metricsPath, firstStep);
          !status.ok())
        return status;
    std::error_code error;
    metrics = std::make_unique<llvm::ToolOutputFile>(
        options.metricsPath, error,
        options.resume ? llvm::sys::fs::OF_Append : llvm::sys::fs::OF_None);
    if (error)
      return absl::InvalidArgumentError("cannot write '" + options.metricsPath +
                                        "': " + error.message());
    // The steps that ran are kept even when a later one fails.
    metrics->keep();
  }
  if (options.runDir.empty())
    return absl::OkStatus();
  std::vector<std::string> csvColumns = {"loss",
                                         "step_time_s",
                                         "samples_per_s",
                                         "achieved_gflops",
                                         "comm_bytes_per_device",
                                         "peak_device_bytes"};
  // nan in the rows of steps without one.
  if (options.evalEvery > 0)
    csvColumns.push_back("heldout_loss");
  if (absl::Status status = csv.open(options.runDir + "/metrics.csv",
                                     csvColumns, options.resume, firstStep);
      !status.ok())
    return status;
  if (options.resume) {
    curve = readMetricsHistory(csv.path(), "loss", firstStep);
    heldoutCurve = readMetricsHistory(csv.path(), "heldout_loss", firstStep);
  }
  return absl::OkStatus();
}

absl::Status TrainRun::runSteps() {
  outs().flush();
  progress = std::make_unique<telemetry::ProgressReporter>(
      options.steps, firstStep, std::cout,
      telemetry::isInteractiveTerminal(fileno(stdout)));
  // The trace covers a window of this run's steps (MaxDiffusion's
  // skip_first_n_steps_for_profiler and profiler_steps): a span per kernel
  // is too much to keep for a whole long run.
  traceBegin = firstStep + options.traceSkipSteps;
  traceEnd = std::min(options.steps, traceBegin + options.traceSteps);
  rt::MeshRuntime &runtime = session->runtime();
  int64_t lastCheckpoint = firstStep;
  // The rows of the batch this process's devices hold: each process makes
  // only those.
  std::vector<data::RowRange> rows;
  if (runtime.process() >= 0)
    for (const data::StepInput &input : batches->inputs()) {
      const rt::ArgumentSpec &arg = program.spec.arguments[input.argument];
      for (int64_t d = 0; d < runtime.numDevices(); ++d) {
        int64_t block = 0;
        for (int32_t axis : arg.dimAxes[0])
          block = block * program.mesh.axes()[axis].size() +
                  runtime.device(d).coordinates()[axis];
        rows.push_back({block * arg.localShape[0],
                        (block + 1) * arg.localShape[0]});
      }
    }
  if (firstStep < options.steps)
    prefetcher = std::make_unique<data::Prefetcher>(
        *batches, positionOf(firstStep), std::move(rows));
  for (int64_t step = firstStep; step < options.steps; ++step) {
    if (tracing && step == traceBegin)
      runtime.enableTracing(true);
    Clock::time_point waitBegin = Clock::now();
    absl::StatusOr<data::PreparedBatch> batch = prefetcher->next();
    Clock::time_point begin = Clock::now();
    if (!batch.ok())
      return abandonSteps(batch.status());
    loadSeconds +=
        std::chrono::duration<double>(batch->end - batch->begin).count();
    loadWaitSeconds += std::chrono::duration<double>(begin - waitBegin).count();
    runtime.traceLoaderSpan("batch of step " + std::to_string(step + 1),
                            batch->begin, batch->end);
    runtime.traceHostSpan("wait for batch", waitBegin, begin, "data");
    if (absl::Status status = feedBatch(*session, batch->inputs);
        !status.ok())
      return abandonSteps(status);
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        session->step(step);
    if (!result.ok())
      return abandonSteps(result.status());
    runtime.traceHostSpan("step " + std::to_string(step + 1), begin,
                          Clock::now());
    std::optional<double> heldout;
    if (options.evalEvery > 0 && (step + 1) % options.evalEvery == 0) {
      Clock::time_point evalBegin = Clock::now();
      absl::StatusOr<double> loss = evaluate();
      if (!loss.ok())
        return abandonSteps(loss.status());
      runtime.traceHostSpan("held-out loss", evalBegin, Clock::now());
      heldout = lastHeldout = *loss;
      heldoutCurve.emplace_back(step + 1, *loss);
      progress->printAbove(formatv("held-out loss at step {0}: {1:f6}",
                                   step + 1, *loss)
                               .str());
    }
    if (absl::Status status = recordStep(step, *result, heldout);
        !status.ok())
      return abandonSteps(status);
    bool last = step + 1 == options.steps;
    if (checkpointing && !last && options.checkpointEvery > 0 &&
        (step + 1) % options.checkpointEvery == 0) {
      if (absl::Status status = saveCheckpoint(step + 1); !status.ok())
        return abandonSteps(status);
      lastCheckpoint = step + 1;
    }
    if (tracing && step + 1 == traceEnd)
      runtime.enableTracing(false);
  }
  progress->finish();
  std::cout.flush();
  prefetcher.reset();
  int64_t endStep = std::max(firstStep, options.steps);
  if (checkpointing && lastCheckpoint != endStep)
    return saveCheckpoint(endStep);
  return absl::OkStatus();
}

absl::Status
TrainRun::recordStep(int64_t step,
                     const rt::TrainingSession::StepResult &result,
                     std::optional<double> heldout) {
  losses.push_back(result.loss);
  curve.emplace_back(step + 1, result.loss);
  totalSeconds += result.seconds;
  double samples = program.batch / result.seconds;
  double gflops = program.modelFlops / result.seconds / 1e9;
  telemetry::StepExtras extras;
  extras.samplesPerSecond = samples;
  extras.gflopsPerSecond = gflops;
  extras.heldoutLoss = lastHeldout;
  progress->update(step + 1, result.loss, result.seconds, extras);
  if (metrics) {
    llvm::json::Object line{
        {"step", step + 1},
        {"loss", result.loss},
        {"step_time_s", result.seconds},
        {"samples_per_s", samples},
        {"model_flops", program.modelFlops},
        {"achieved_gflops", gflops},
        {"peak_device_bytes", session->peakDeviceBytes()},
        {"peak_host_bytes", session->peakHostBytes()},
        {"comm_bytes_per_device", session->lastStepCommBytes()},
    };
    if (heldout)
      line["heldout_loss"] = *heldout;
    metrics->os() << llvm::json::Value(std::move(line)) << "\n";
    metrics->os().flush();
  }
  if (!csv.isOpen())
    return absl::OkStatus();
  std::vector<double> row = {
      result.loss, result.seconds, samples, gflops,
      static_cast<double>(session->lastStepCommBytes()),
      static_cast<double>(session->peakDeviceBytes())};
  if (options.evalEvery > 0)
    row.push_back(heldout.value_or(std::numeric_limits<double>::quiet_NaN()));
  return csv.write(step + 1, row);
}

absl::Status TrainRun::saveCheckpoint(int64_t stepsTaken) {
  Clock::time_point begin = Clock::now();
  ckpt::CheckpointMeta meta;
  meta.step = stepsTaken;
  meta.seed = seed;
  meta.dataSeed = seed;
  // The next sample of the data stream (sd/Data/Batches.h).
  meta.dataPosition = positionOf(stepsTaken);
  meta.dataEpoch = batches->epochOf(meta.dataPosition);
  meta.model = model;
  meta.hyperparameters = hyperparameters(options.pipeline);
  if (absl::Status status = ckpt::saveCheckpoint(
          options.checkpointDir, *session, meta, hooks.checkpointWrite);
      !status.ok())
    return status;
  session->runtime().traceHostSpan("checkpoint", begin, Clock::now());
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
  progress->printAbove(
      formatv("checkpoint: step {0} -> {1} ({2} files, {3}, {4:f2} s)",
              stepsTaken, path, files,
              rt::formatBytes(static_cast<int64_t>(bytes)), secondsSince(begin))
          .str());
  return absl::OkStatus();
}

absl::Status TrainRun::abandonSteps(absl::Status status) {
  progress->finish();
  prefetcher.reset();
  if (tracing && session->runtime().tracingEnabled())
    if (absl::Status written = writeTrace(); !written.ok())
      warn(std::string(written.message()));
  return status;
}

//===----------------------------------------------------------------------===//
// Outputs
//===----------------------------------------------------------------------===//

absl::Status TrainRun::writeTrace() {
  rt::MeshRuntime &runtime = session->runtime();
  runtime.enableTracing(false);
  absl::StatusOr<int64_t> events =
      rt::writeChromeTrace(runtime, options.tracePath);
  if (!events.ok())
    return events.status();
  std::string window =
      traceBegin < traceEnd
          ? formatv("steps {0}-{1}", traceBegin + 1, traceEnd).str()
          : std::string("no step: the run ended before the window");
  outs() << "trace: " << options.tracePath << " (" << window << ", " << *events
         << " events; open it in https://ui.perfetto.dev)\n";
  return absl::OkStatus();
}

void TrainRun::printSummary() {
  rt::MeshRuntime &runtime = session->runtime();
  outs() << "done: " << count(losses.size(), "step")
         << format(" in %.2f s, loss %.6f -> %.6f\n", totalSeconds,
                   losses.front(), losses.back());
  outs() << "per device: peak device memory "
         << rt::formatBytes(session->peakDeviceBytes()) << ", peak host memory "
         << rt::formatBytes(session->peakHostBytes()) << ", sent "
         << rt::formatBytes(session->lastStepCommBytes())
         << " per step in collectives";
  if (!options.pipeline.mesh.empty())
    outs() << " (sdopt predicts " << rt::formatBytes(program.predictedCommBytes)
           << ")";
  outs() << "\n";
  // sd.offload / sd.reload traffic (remat policies with offload).
  int64_t offloaded = 0, reloaded = 0;
  for (int64_t d = 0; d < runtime.numDevices(); ++d) {
    offloaded = std::max(offloaded, runtime.device(d).counters().offloadBytes);
    reloaded = std::max(reloaded, runtime.device(d).counters().reloadBytes);
  }
  int64_t ran = static_cast<int64_t>(losses.size());
  if (offloaded + reloaded > 0)
    outs() << "per device: moved " << rt::formatBytes(offloaded / ran)
           << " to host memory and " << rt::formatBytes(reloaded / ran)
           << " back per step (sd.offload, sd.reload)\n";
  printCommunicationTimes();
  if (batches && ran > 0) {
    outs() << "data: ";
    if (datasetIndex)
      outs() << datasetIndex->name << ", epoch "
             << batches->epochOf(positionOf(firstStep + ran) - 1) << " at the end";
    else
      outs() << "synthetic (" << batches->numSamples() << " samples)";
    outs() << format(", loader %.2f ms per batch, %.2f ms of it exposed "
                     "(%.1f%% of a step)\n",
                     1e3 * loadSeconds / ran, 1e3 * loadWaitSeconds / ran,
                     100 * loadWaitSeconds / totalSeconds);
  }
}

void TrainRun::printCommunicationTimes() {
  if (program.predictedCommunication.empty() || losses.empty())
    return;
  rt::MeshRuntime &runtime = session->runtime();
  const std::vector<::sd::MeshAxis> &axes = program.mesh.axes();
  outs() << "per device and step, collectives by mesh axes (measured: the "
            "slowest device";
  if (runtime.process() >= 0)
    outs() << " of this process";
  outs() << ", waits for peers included):\n";
  for (const AxisCommunication &row : program.predictedCommunication) {
    uint32_t mask = 0;
    for (const std::string &name : row.axes)
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i].name == name)
          mask |= 1u << i;
    double measured = 0;
    for (int64_t d = 0; d < runtime.numDevices(); ++d) {
      const std::map<uint32_t, double> &seconds =
          runtime.device(d).counters().collectiveSeconds;
      auto it = seconds.find(mask);
      if (it != seconds.end())
        measured = std::max(measured, it->second);
    }
    measured /= static_cast<double>(losses.size());
    outs() << "  " << llvm::left_justify(llvm::join(row.axes, ","), 18)
           << llvm::left_justify(::sd::linkName(row.link), 9)
           << llvm::right_justify(rt::formatBytes(row.bytesPerDevice), 11)
           << "  measured " << llvm::right_justify(::sd::formatSeconds(measured), 9)
           << ", sdopt predicts "
           << ::sd::formatSeconds(row.predictedSeconds) << "\n";
  }
}

absl::Status TrainRun::writeOutputs() {
  if (!losses.empty())
    printSummary();
  if (!options.runDir.empty()) {
    std::string plot = options.runDir + "/loss.png";
    telemetry::LossPlotOptions plotOptions;
    plotOptions.runName = options.runName;
    plotOptions.secondary = heldoutCurve;
    if (absl::Status status =
            telemetry::writeLossPlot(plot, curve, plotOptions);
        !status.ok())
      return status;
    outs() << "metrics: " << options.runDir << "/metrics.csv, " << plot << "\n";
  }
  if (tracing)
    if (absl::Status status = writeTrace(); !status.ok())
      return status;
  if (!options.exportPath.empty()) {
    if (absl::Status status =
            exportParameters(*session, options.exportPath,
                             std::max(firstStep, options.steps), model);
        !status.ok())
      return status;
    outs() << "exported the parameters to " << options.exportPath << "\n";
  }
  if (!options.exportEmaPath.empty()) {
    if (absl::Status status = exportParameters(
            *session, options.exportEmaPath,
            std::max(firstStep, options.steps), model, /*ema=*/true);
        !status.ok())
      return status;
    outs() << "exported the EMA parameters to " << options.exportEmaPath
           << "\n";
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Verify
//===----------------------------------------------------------------------===//

absl::Status TrainRun::verify() {
  if (!options.verify)
    return absl::OkStatus();
  if (losses.empty()) {
    outs() << "verify: no steps ran, nothing to compare\n";
    return absl::OkStatus();
  }
  PipelineOptions single = options.pipeline;
  single.mesh.clear();
  single.dcnMesh.clear();
  single.devices = 0;
  TrainProgram singleProgram;
  // 0 threads: all the cores OpenMP sees for the one device. Every process
  // of a multi-process run runs the reference (the comparison gathers the
  // run's parameters on all of them), each on its own devices' cores.
  rt::MeshRuntime &runtime = session->runtime();
  DeviceSettings settings = options.device;
  settings.threadsPerDevice =
      runtime.process() < 0
          ? 0
          : runtime.threadsPerDevice() * static_cast<int>(runtime.numDevices());
  settings.deviceMemoryBudget = settings.hostMemoryBudget = 0;
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> reference =
      startSession(single, settings, singleProgram);
  if (!reference.ok())
    return reference.status();
  if (absl::Status status = (*reference)->setArguments(start); !status.ok())
    return status;
  // NaN or infinity anywhere fails the comparison.
  bool finite = true;
  double worstLoss = 0;
  for (int64_t step = firstStep; step < options.steps; ++step) {
    absl::StatusOr<std::vector<std::vector<float>>> batch =
        batches->make(positionOf(step));
    if (!batch.ok())
      return batch.status();
    if (absl::Status status = feedBatch(**reference, *batch); !status.ok())
      return status;
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        (*reference)->step(step);
    if (!result.ok())
      return result.status();
    double loss = losses[step - firstStep];
    finite &= std::isfinite(loss) && std::isfinite(result->loss);
    double diff = std::fabs(loss - result->loss) /
                  std::max(std::fabs(result->loss), 1e-30);
    worstLoss = std::max(worstLoss, diff);
  }
  absl::StatusOr<rt::ParameterComparison> comparison =
      rt::compareParameters(*session, **reference);
  if (!comparison.ok()) {
    if (absl::IsInvalidArgument(comparison.status()))
      return absl::InvalidArgumentError(
          "--verify: " + std::string(comparison.status().message()));
    return comparison.status();
  }
  finite &= comparison->finite;
  if (!finite) {
    outs() << "verify: FAILED: a loss or parameter is not finite\n";
    return reportedFailure("verify: a loss or parameter is not finite");
  }
  double worstParam = comparison->relativeDifference;
  std::string worstName =
      comparison->worstTensor.empty() ? "all equal" : comparison->worstTensor;
  bool ok = worstLoss <= 1e-4 && worstParam <= 1e-4;
  if (firstStep > 0)
    outs() << formatv("verify: steps {0}-{1} from the checkpoint's values\n",
                      firstStep + 1, options.steps);
  outs() << format("verify: largest relative difference to one device: "
                   "loss %.3g, parameters %.3g (%s): %s\n",
                   worstLoss, worstParam, worstName.c_str(),
                   ok ? "ok" : "FAILED (above 1e-4)");
  if (!ok)
    return reportedFailure("verify: the run differs from one device");
  return absl::OkStatus();
}

} // namespace

absl::Status mlir::sd::runTraining(ModuleOp module,
                                   const TrainRunOptions &options,
                                   const TrainRunHooks &hooks) {
  absl::Status status = TrainRun(module, options, hooks).run();
  // The display is complete before the tool prints an error below it.
  std::cout.flush();
  outs().flush();
  return status;
}
