//===- TrainSteps.cpp - The step loop of a run ----------------------------===//

#include "TrainRunImpl.h"

namespace mlir::sd::train {

absl::Status TrainRun::openOutputs() {
  if (!options.metricsPath.empty()) {
    if (options.resume)
      if (absl::Status status =
              telemetry::trimMetricsLines(options.metricsPath, firstStep);
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
    curve = telemetry::readMetricsHistory(csv.path(), "loss", firstStep);
    heldoutCurve =
        telemetry::readMetricsHistory(csv.path(), "heldout_loss", firstStep);
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
        // A padded block's rows past the batch are padding.
        rows.push_back(
            {std::min(block * arg.localShape[0], arg.globalShape[0]),
             std::min((block + 1) * arg.localShape[0], arg.globalShape[0])});
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
    if (absl::Status status = feedBatch(*session, batch->inputs); !status.ok())
      return abandonSteps(status);
    ProcessUsage usageBefore = processUsage();
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        session->step(step);
    if (!result.ok())
      return abandonSteps(result.status());
    ProcessUsage usage = processUsage() - usageBefore;
    if (step != firstStep) {
      laterStepsUsage += usage;
      laterStepsSeconds += result->seconds;
    }
    runtime.traceHostSpan("step " + std::to_string(step + 1), begin,
                          Clock::now());
    if (step == firstStep) {
      firstStepAt = secondsSince(runBegin);
      firstStepSeconds = result->seconds;
    }
    // A NaN or infinite loss poisons every parameter: stop before the step
    // is checkpointed or exported.
    if (!std::isfinite(result->loss) && !options.allowNonfiniteLoss)
      return abandonSteps(absl::FailedPreconditionError(
          formatv(
              "step {0}: the loss is {1}; stopping before it is checkpointed "
              "(--allow-nonfinite-loss goes on)",
              step + 1, result->loss)
              .str()));
    std::optional<double> heldout;
    if (options.evalEvery > 0 && (step + 1) % options.evalEvery == 0) {
      Clock::time_point evalBegin = Clock::now();
      absl::StatusOr<double> loss = evaluate();
      if (!loss.ok())
        return abandonSteps(loss.status());
      runtime.traceHostSpan("held-out loss", evalBegin, Clock::now());
      heldout = lastHeldout = *loss;
      heldoutCurve.emplace_back(step + 1, *loss);
      progress->printAbove(
          formatv("held-out loss at step {0}: {1:f6}", step + 1, *loss).str());
    }
    if (absl::Status status = recordStep(step, *result, usage, heldout);
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

absl::Status TrainRun::recordStep(int64_t step,
                                  const rt::TrainingSession::StepResult &result,
                                  const ProcessUsage &usage,
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
        {"page_faults", usage.pageFaults},
        {"involuntary_context_switches", usage.involuntarySwitches},
    };
    if (heldout)
      line["heldout_loss"] = *heldout;
    metrics->os() << llvm::json::Value(std::move(line)) << "\n";
    metrics->os().flush();
  }
  if (!csv.isOpen())
    return absl::OkStatus();
  std::vector<double> row = {result.loss,
                             result.seconds,
                             samples,
                             gflops,
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
  meta.frozenFrom = frozenSource();
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

} // namespace mlir::sd::train
