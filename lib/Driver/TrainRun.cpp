//===- TrainRun.cpp - A training run in phases ----------------------------===//

#include "TrainRunImpl.h"

#include "sd/Driver/Pretrained.h"
#include "sd/Driver/ReferenceTables.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Support/Files.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include "absl/strings/cord.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::train;
using llvm::errs;
using llvm::format;
using llvm::formatv;
using llvm::outs;
using llvm::Twine;

namespace mlir::sd::train {

void warn(const Twine &message) {
  outs().flush();
  errs() << "sdrun: warning: " << message << "\n";
}

std::string count(size_t n, llvm::StringRef noun) {
  if (n == 1)
    return "1 " + noun.str();
  return std::to_string(n) + " " + noun.str() +
         (noun.ends_with("s") || noun.ends_with("ch") ? "es" : "s");
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string modelIdentifier(const std::string &path) {
  std::string id = llvm::sys::path::filename(path).str();
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      ::sd::readRegularFile(path, "model file", ::sd::kMaxProgramFileBytes);
  if (buffer.ok())
    id += " xxh3:" + llvm::utohexstr(llvm::xxh3_64bits(
                         llvm::arrayRefFromStringRef((*buffer)->getBuffer())));
  return id;
}

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

absl::Status TrainRun::run() {
  if (options.compileOnly)
    return compileOnly();
  for (absl::Status (TrainRun::*phase)() :
       {&TrainRun::preflight, &TrainRun::findCheckpoint, &TrainRun::openDataset,
        &TrainRun::compile, &TrainRun::claimOutputs, &TrainRun::makeBatches,
        &TrainRun::restore, &TrainRun::openOutputs, &TrainRun::runSteps,
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
  if (absl::Status status = checkLossSettings(); !status.ok())
    return status;
  // Each device of this process is a thread team: sdopt may analyse any
  // mesh, but a run starts only as many devices as a process can hold.
  if (options.mesh.devicesPerProcess() > ::sd::kMaxDevicesPerProcess)
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh %s has %d devices in one process; sdrun runs at most %d",
        options.mesh.toString(), options.mesh.devicesPerProcess(),
        ::sd::kMaxDevicesPerProcess));
  for (auto [path, flag] : {std::pair<const std::string &, llvm::StringRef>{
                                options.exportPath, "--export"},
                            {options.exportEmaPath, "--export-ema"},
                            {options.exportMergedPath, "--export-merged"},
                            {options.tracePath, "--trace"},
                            {options.metricsPath, "--metrics"}}) {
    // The run's directory (output_dir/run_name) is created once the run's
    // checks pass; a file placed in it is fine.
    if (!options.runDir.empty() &&
        llvm::sys::path::parent_path(path) == options.runDir)
      continue;
    if (absl::Status status = checkOutputPath(path, flag); !status.ok())
      return status;
  }
  // Before compiling: a FIFO would block and /dev/zero never end.
  initFromPath = options.initFrom;
  if (!options.pretrained.empty()) {
    // The folder's config against the model, before anything compiles.
    absl::StatusOr<std::string> weights = pretrainedWeightsFor(
        module, options.pretrained, options.pretrainedOrigin);
    if (!weights.ok())
      return weights.status();
    initFromPath = *weights;
  }
  if (!initFromPath.empty())
    if (absl::Status status =
            ::sd::checkRegularFile(initFromPath, "--init-from file");
        !status.ok())
      return status;
  // A file in the way is not a directory in use: say what it is.
  if (checkpointing && llvm::sys::fs::exists(options.checkpointDir) &&
      !llvm::sys::fs::is_directory(options.checkpointDir))
    return absl::InvalidArgumentError(
        "--checkpoint-dir='" + options.checkpointDir + "' is not a directory");
  return absl::OkStatus();
}

absl::Status TrainRun::claimOutputs() {
  if (!options.runDir.empty())
    if (std::error_code error =
            llvm::sys::fs::create_directories(options.runDir))
      return absl::InvalidArgumentError("cannot create '" + options.runDir +
                                        "': " + error.message());
  if (!checkpointing)
    return absl::OkStatus();
  // One run at a time writes into a checkpoint directory; of a
  // multi-process run, process 0 holds the lock for all.
  if (std::error_code error =
          llvm::sys::fs::create_directories(options.checkpointDir))
    return absl::InvalidArgumentError(
        "cannot create '" + options.checkpointDir + "': " + error.message());
  if (options.device.process > 0)
    return absl::OkStatus();
  absl::StatusOr<ckpt::DirectoryLock> held =
      ckpt::DirectoryLock::acquire(options.checkpointDir);
  if (!held.ok())
    return held.status();
  lock.emplace(std::move(*held));
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
  absl::StatusOr<std::unique_ptr<ckpt::CheckpointReader>> read =
      ckpt::CheckpointReader::open(latest);
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

/// The file's tensors that the model computes instead of loading (DiT's
/// pos_embed) must be the model's tables; each one checked is no longer
/// listed as a tensor the model does not have.
absl::Status TrainRun::checkComputedImports() {
  for (const ComputedTensor &table : computedTensors(module)) {
    auto unused = llvm::find(initFrom->unused, table.name);
    if (unused == initFrom->unused.end())
      continue;
    for (const std::unique_ptr<ckpt::SafetensorsReader> &reader :
         initFrom->readers) {
      const ckpt::SafetensorsTensor *tensor = reader->find(table.name);
      if (!tensor)
        continue;
      std::vector<float> values(
          static_cast<size_t>(rt::numElements(tensor->shape)));
      if (tensor->shape != table.shape)
        values.clear();
      else if (absl::Status status = reader->readBlock(
                   *tensor, std::vector<int64_t>(tensor->shape.size(), 0),
                   tensor->shape, values.data());
               !status.ok())
        return status;
      if (absl::Status status =
              checkComputedTensor(table, tensor->shape, values, reader->path());
          !status.ok())
        return status;
      computedChecked.push_back(table.name);
      break;
    }
    initFrom->unused.erase(llvm::find(initFrom->unused, table.name));
  }
  return absl::OkStatus();
}

absl::Status TrainRun::compile() {
  Clock::time_point begin = Clock::now();
  FailureOr<TrainProgram> step = buildTrainProgram(module, options.pipeline);
  if (failed(step))
    return compilerFailure("could not build the training step");
  program = std::move(*step);
  buildSeconds = secondsSince(begin);
  // The run's optimizer values, fed to the step once.
  for (rt::ArgumentSpec &arg : program.spec.arguments)
    if (arg.kind == rt::ArgumentKind::Hyperparameters)
      arg.values = hyperparameterValues(options.pipeline.training.step);
  // Before the C++ compile: a run that cannot fit is refused now.
  StagingOptions staging;
  staging.verify = options.verify;
  // Without mpirun one process runs every device, DCN axes included.
  int64_t devices = options.device.process >= 0
                        ? program.mesh.devicesPerProcess()
                        : program.mesh.numDevices();
  memory = predictProcessMemory(program, devices, residentBytes(), staging);
  absl::Status fits =
      checkMemory(memory, options.device, processesOnThisHost());
  if (program.mesh.numProcesses() > 1)
    fits = agreeAcrossProcesses(options.device.processGroup.get(), fits);
  // --init-from's file, matched against the step's parameters (names,
  // shapes, dtypes, the missing ones) before the C++ compile too.
  absl::Status imported = fits;
  if (fits.ok() && !initFromPath.empty()) {
    absl::StatusOr<ckpt::ParameterImport> file =
        ckpt::openParameterImport(initFromPath, program.spec);
    imported = file.status();
    if (file.ok()) {
      initFrom = std::move(*file);
      imported = checkComputedImports();
      if (imported.ok() && !initFrom->missing.empty() && !options.allowMissing)
        imported = absl::InvalidArgumentError(
            initFrom->path + " has no tensor for " +
            count(initFrom->missing.size(), "parameter") +
            " of the model: " + llvm::join(initFrom->missing, ", ") +
            " (--allow-missing starts them from their seeded values)");
    }
  }
  if (program.mesh.numProcesses() > 1)
    imported =
        agreeAcrossProcesses(options.device.processGroup.get(), imported);
  if (!imported.ok())
    return imported;
  begin = Clock::now();
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> started =
      startProgramSession(program, options.device);
  if (!started.ok())
    return started.status();
  session = std::move(*started);
  compileSeconds = secondsSince(begin);
  printHeader();
  return absl::OkStatus();
}

void TrainRun::printHeader() {
  rt::MeshRuntime &runtime = session->runtime();
  int64_t params = 0, frozen = 0, frozenTensors = 0;
  for (const rt::ArgumentSpec &arg : program.spec.arguments)
    if (arg.kind == rt::ArgumentKind::Parameter) {
      params += rt::numElements(arg.globalShape);
      if (arg.frozen) {
        frozen += rt::numElements(arg.globalShape);
        ++frozenTensors;
      }
    }
  outs() << "sdrun: " << options.modelPath << ", " << params << " parameters";
  // What a fine-tune trains: the adapters, or what is not frozen.
  if (frozen > 0) {
    outs() << " (" << params - frozen << " trained, "
           << format("%.2f", 100.0 * (params - frozen) / params) << "%";
    if (const std::optional<AddLoraOptions> &lora = options.pipeline.lora)
      outs() << ": LoRA rank " << lora->rank << ", alpha "
             << format("%g", lora->alpha);
    else
      outs() << "; " << count(frozenTensors, "tensor") << " frozen";
    outs() << ")";
  }
  outs() << ", batch " << program.batch;
  // A step accumulates the gradients of its microbatches.
  if (int64_t accum = options.pipeline.training.step.gradAccum; accum > 1)
    outs() << " (" << accum << " microbatches of " << program.batch / accum
           << ")";
  outs() << ", mesh " << program.mesh.toString() << " (";
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
  printPrecision();
  for (const std::string &note : options.notes)
    outs() << note << "\n";
}

void TrainRun::printPrecision() {
  std::string line = describePrecision(options.pipeline, /*training=*/true);
  if (!line.empty())
    outs() << line << "\n";
}

} // namespace mlir::sd::train

absl::Status mlir::sd::runTraining(ModuleOp module,
                                   const TrainRunOptions &options,
                                   const TrainRunHooks &hooks) {
  absl::Status status = TrainRun(module, options, hooks).run();
  // The display is complete before the tool prints an error below it.
  std::cout.flush();
  outs().flush();
  return status;
}
