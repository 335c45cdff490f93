//===- TrainOutputs.cpp - The summary, trace, exports and verification ----===//

#include "TrainRunImpl.h"

namespace mlir::sd::train {

std::map<std::string, std::string> TrainRun::exportMetadata() const {
  return {{"format", "pt"},
          {"step", std::to_string(std::max(firstStep, options.steps))},
          {"model", model},
          {ckpt::kLayoutKey, ckpt::kLayoutReference}};
}

std::string TrainRun::loraMetadata() const {
  const AddLoraOptions &lora = *options.pipeline.lora;
  // PEFT's LoraConfig fields, as diffusers stores them beside its LoRA
  // weights; the target modules are those the file holds.
  llvm::json::Array targets;
  for (const rt::ArgumentSpec &arg : program.spec.arguments) {
    llvm::StringRef name = arg.parameter;
    if (arg.kind == rt::ArgumentKind::Parameter &&
        name.consume_back(".lora_A.weight"))
      targets.push_back(name.str());
  }
  llvm::json::Object config{{"peft_type", "LORA"},
                            {"r", lora.rank},
                            {"lora_alpha", lora.alpha},
                            {"target_modules", std::move(targets)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(config));
  return text;
}

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
  printMemory();
  printUsage();
  outs() << format("time to first step: %.2f s (build %.2f s, compile and "
                   "load %.2f s, starting values %.2f s, first step %.2f s)\n",
                   firstStepAt, buildSeconds, compileSeconds, restoreSeconds,
                   losses.empty() ? 0.0 : firstStepSeconds);
  if (batches && ran > 0) {
    outs() << "data: ";
    if (datasetIndex)
      outs() << datasetIndex->name << ", epoch "
             << batches->epochOf(positionOf(firstStep + ran) - 1)
             << " at the end";
    else
      outs() << "synthetic (" << batches->numSamples() << " samples)";
    outs() << format(", loader %.2f ms per batch, %.2f ms of it exposed "
                     "(%.1f%% of a step)\n",
                     1e3 * loadSeconds / ran, 1e3 * loadWaitSeconds / ran,
                     100 * loadWaitSeconds / totalSeconds);
  }
}

void TrainRun::printMemory() {
  // Every process's peak (each process prints the same line; only
  // process 0's is shown).
  std::vector<int64_t> peaks = {peakResidentBytes()};
  if (options.device.processGroup && program.mesh.numProcesses() > 1)
    if (absl::StatusOr<std::vector<std::string>> all =
            options.device.processGroup->allGather(std::to_string(peaks[0]));
        all.ok()) {
      peaks.clear();
      for (const std::string &peak : *all)
        peaks.push_back(std::atoll(peak.c_str()));
    }
  int64_t largest = *std::max_element(peaks.begin(), peaks.end());
  int64_t sum = 0;
  for (int64_t peak : peaks)
    sum += peak;
  outs() << "per process: peak resident memory " << rt::formatBytes(largest);
  if (peaks.size() > 1)
    outs() << " (the largest of " << peaks.size() << " processes; "
           << rt::formatBytes(sum) << " in all)";
  outs() << ", predicted " << rt::formatBytes(memory.total()) << " (";
  bool first = true;
  for (const MemoryItem &item : memory.items()) {
    if (item.bytes == 0)
      continue;
    outs() << (first ? "" : ", ") << item.name << " "
           << rt::formatBytes(item.bytes);
    first = false;
  }
  outs() << ")\n";
}

void TrainRun::printUsage() {
  int64_t ran = static_cast<int64_t>(losses.size());
  if (ran < 2 || laterStepsSeconds <= 0)
    return;
  // Every process's counts; the line shows the most of each.
  const ProcessUsage &own = laterStepsUsage;
  std::vector<ProcessUsage> all = {own};
  if (options.device.processGroup && program.mesh.numProcesses() > 1)
    if (absl::StatusOr<std::vector<std::string>> gathered =
            options.device.processGroup->allGather(absl::StrFormat(
                "%d %d %d %.6f %.6f", own.pageFaults, own.majorPageFaults,
                own.involuntarySwitches, own.userSeconds, own.systemSeconds));
        gathered.ok()) {
      all.clear();
      for (const std::string &text : *gathered) {
        ProcessUsage u;
        long long faults = 0, major = 0, switches = 0;
        if (std::sscanf(text.c_str(), "%lld %lld %lld %lf %lf", &faults, &major,
                        &switches, &u.userSeconds, &u.systemSeconds) != 5)
          continue;
        u.pageFaults = faults;
        u.majorPageFaults = major;
        u.involuntarySwitches = switches;
        all.push_back(u);
      }
    }
  // The most faults and switches of any process, and the CPU time of the
  // busiest one.
  ProcessUsage most;
  for (const ProcessUsage &u : all) {
    most.pageFaults = std::max(most.pageFaults, u.pageFaults);
    most.majorPageFaults = std::max(most.majorPageFaults, u.majorPageFaults);
    most.involuntarySwitches =
        std::max(most.involuntarySwitches, u.involuntarySwitches);
    if (u.userSeconds + u.systemSeconds >
        most.userSeconds + most.systemSeconds) {
      most.userSeconds = u.userSeconds;
      most.systemSeconds = u.systemSeconds;
    }
  }
  int64_t first = firstStep + 2, last = firstStep + ran;
  outs() << "per process, step" << (first == last ? " " : "s ") << first
         << (first == last ? "" : "-" + std::to_string(last)) << ": "
         << count(static_cast<size_t>(most.pageFaults), "page fault") << " ("
         << most.majorPageFaults << " major), "
         << count(static_cast<size_t>(most.involuntarySwitches),
                  "involuntary context switch")
         << format(", %.2f cores busy (%.2f s user and %.2f s system CPU in "
                   "%.2f s)",
                   (most.userSeconds + most.systemSeconds) / laterStepsSeconds,
                   most.userSeconds, most.systemSeconds, laterStepsSeconds);
  if (all.size() > 1)
    outs() << " (the most of " << all.size() << " processes)";
  outs() << "\n";
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
           << "  measured "
           << llvm::right_justify(::sd::formatSeconds(measured), 9)
           << ", sdopt predicts " << ::sd::formatSeconds(row.predictedSeconds)
           << "\n";
  }
}

absl::Status TrainRun::writeOutputs() {
  // A fresh metrics.csv replaces the earlier run's file when it closes.
  if (csv.isOpen())
    if (absl::Status status = csv.close(); !status.ok())
      return status;
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
  // With LoRA, --export and --export-ema write the adapters alone.
  const std::optional<AddLoraOptions> &lora = options.pipeline.lora;
  ckpt::ExportedTensors tensors =
      lora ? ckpt::ExportedTensors::Trained : ckpt::ExportedTensors::Model;
  std::map<std::string, std::string> metadata = exportMetadata();
  if (lora)
    metadata[ckpt::kLoraMetadataKey] = loraMetadata();
  std::string what = lora ? "LoRA adapters" : "parameters";
  if (!options.exportPath.empty()) {
    if (absl::Status status = ckpt::exportParameters(
            *session, options.exportPath, ckpt::ExportedValues::Parameters,
            metadata, options.exportBF16, tensors);
        !status.ok())
      return status;
    outs() << "exported the " << what << " to " << options.exportPath
           << (options.exportBF16 ? " (BF16)" : "") << "\n";
  }
  if (!options.exportEmaPath.empty()) {
    if (absl::Status status = ckpt::exportParameters(
            *session, options.exportEmaPath, ckpt::ExportedValues::Ema,
            metadata, options.exportBF16, tensors);
        !status.ok())
      return status;
    outs() << "exported the EMA " << what << " to " << options.exportEmaPath
           << "\n";
  }
  if (!options.exportMergedPath.empty()) {
    if (absl::Status status = ckpt::exportParameters(
            *session, options.exportMergedPath,
            ckpt::ExportedValues::Parameters, exportMetadata(),
            options.exportBF16, ckpt::ExportedTensors::Merged,
            options.loraScale);
        !status.ok())
      return status;
    outs() << "exported the model with the LoRA adapters merged to "
           << options.exportMergedPath << "\n";
  }
  return absl::OkStatus();
}

/// --verify's bound on the relative differences: f32 runs, and runs whose
/// activations are bf16 (one bf16 rounding step).
static constexpr double kVerifyBound = 1e-4;
static constexpr double kVerifyBoundBF16 = 1.0 / 256.0;

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
  // (At most the CPUs this process may run on: mpirun may bind a rank to
  // fewer than its devices' threads.)
  settings.threadsPerDevice =
      runtime.process() < 0
          ? 0
          : std::min(runtime.threadsPerDevice() *
                         static_cast<int>(runtime.numDevices()),
                     ::sd::rt::availableCpus());
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
  // In bf16 the partitioned program rounds where the one-device program
  // does not (each device's partial sums of a split reduction, a norm's
  // statistics over a split image), so the two differ by bf16 rounding
  // steps; a partitioning fault moves values by far more than one step.
  bool bf16 = options.pipeline.activationsDtype == ::sd::DType::BFloat16;
  double bound = bf16 ? kVerifyBoundBF16 : kVerifyBound;
  bool ok = worstLoss <= bound && worstParam <= bound;
  if (firstStep > 0)
    outs() << formatv("verify: steps {0}-{1} from the checkpoint's values\n",
                      firstStep + 1, options.steps);
  const char *verdict = ok     ? "ok"
                        : bf16 ? "FAILED (above 2^-8, one bf16 step)"
                               : "FAILED (above 1e-4)";
  outs() << format("verify: largest relative difference to one device: "
                   "loss %.3g, parameters %.3g (%s): %s\n",
                   worstLoss, worstParam, worstName.c_str(), verdict);
  if (!ok)
    return reportedFailure("verify: the run differs from one device");
  return absl::OkStatus();
}

} // namespace mlir::sd::train
