//===- TrainRunImpl.h - The phases of a training run ------------*- C++ -*-===//
//
// Private to lib/Driver: the state one training run shares between its
// phases, each defined in its own file:
//
//   TrainRun.cpp      the phases' order, preflight, the checkpoint to resume
//                     from, building and compiling the step, the header
//   TrainStart.cpp    the starting values (seeded blocks, --init-from,
//                     --resume), read block by block into the session
//   TrainData.cpp     the data set, each step's batch, the held-out loss
//   TrainSteps.cpp    the step loop, its metrics and checkpoints
//   TrainOutputs.cpp  the summary, trace, exports and --verify
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_DRIVER_TRAINRUNIMPL_H
#define SD_LIB_DRIVER_TRAINRUNIMPL_H

#include "sd/Driver/TrainRun.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Exchange.h"
#include "sd/Data/Batches.h"
#include "sd/Data/Dataset.h"
#include "sd/Driver/MemoryPlan.h"
#include "sd/Driver/TrainModelFile.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Session.h"
#include "sd/Runtime/Trace.h"
#include "sd/Sharding/YamlDiagnostics.h"
#include "sd/Telemetry/LossPlot.h"
#include "sd/Telemetry/MetricsCsv.h"
#include "sd/Telemetry/MetricsHistory.h"
#include "sd/Telemetry/Progress.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <optional>

namespace mlir::sd::train {

namespace rt = ::sd::rt;
namespace ckpt = ::sd::ckpt;
namespace telemetry = ::sd::telemetry;
namespace data = ::sd::data;
using llvm::errs;
using llvm::format;
using llvm::formatv;
using llvm::outs;
using llvm::Twine;

/// `sdrun: warning: MESSAGE` on stderr, after what stdout holds.
void warn(const llvm::Twine &message);
/// "1 key", "3 keys", "2 batches".
std::string count(size_t n, llvm::StringRef noun);
using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start);
/// The model's file name and a hash of its text: what a checkpoint records
/// to say which model it belongs to.
std::string modelIdentifier(const std::string &path);
/// The optimizer's hyperparameters, as a checkpoint records them.
std::map<std::string, double> hyperparameters(const PipelineOptions &options);

/// One training run. run() calls the phases in order; each returns the
/// run's first error, and the state the later phases need is kept in the
/// members.
class TrainRun {
public:
  TrainRun(ModuleOp module, const TrainRunOptions &options,
           const TrainRunHooks &hooks);

  absl::Status run();

private:
  //===--- Phases ---------------------------------------------------------===//

  /// Checks the outputs and the options before anything runs (creating
  /// nothing).
  absl::Status preflight();
  /// Once the step is built and fits: creates the output directory and the
  /// checkpoint directory and takes the latter's lock.
  absl::Status claimOutputs();
  /// Loads the checkpoint --resume continues from (every checksum
  /// verified) before the step is compiled, so that a damaged checkpoint is
  /// reported at once; refuses to start a fresh run in a directory with
  /// another run's checkpoints.
  absl::Status findCheckpoint();
  /// Builds, compiles and loads the step, and prints the run's header.
  absl::Status compile();
  /// sdrun --compile-only: builds and compiles the step, says where it is.
  absl::Status compileOnly();
  /// Checks --init-from's tensors that the model computes (computedChecked).
  absl::Status checkComputedImports();
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
  /// The metadata of --export's and --export-ema's files.
  std::map<std::string, std::string> exportMetadata() const;
  /// The summary's line of this process's peak and predicted memory.
  void printMemory();
  /// The summary's line of what the processes counted during the steps
  /// after the first: page faults, involuntary context switches, cores busy.
  void printUsage();
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
  /// The precision line: dtypes, and how bf16 products run on this CPU.
  void printPrecision();
  absl::Status restoreCheckpoint();
  /// Where the frozen parameters come from, as checkpoints record it
  /// (CheckpointMeta::frozenFrom); "" when every parameter is trained.
  std::string frozenSource() const;
  /// With LoRA: the adapters' PEFT config as JSON (rank, alpha, target
  /// modules), for the exported file's metadata.
  std::string loraMetadata() const;
  /// --verify: gathers the starting values into `start`.
  absl::Status gatherStart();
  /// Opens and checks the data set (dataset_type sd) before compiling.
  absl::Status openDataset();
  /// The step's inputs and the maker of their batches (after compile).
  absl::Status makeBatches();
  /// timestep_sampling's options.
  void timestepOptions(data::BatchOptions &batch) const;
  /// The settings that depend on what @loss predicts, before compiling:
  /// the config's prediction_type must be it, timestep_sampling other than
  /// uniform needs a flow model, snr_gamma an epsilon or v_prediction one.
  /// Then checkUNetSettings.
  absl::Status checkLossSettings() const;
  /// A UNet config's resolution and norm_num_groups against a UNet program
  /// (one with group norms): its latents × 8 and its groups.
  absl::Status checkUNetSettings() const;
  /// The stream position of step `step`'s batch.
  int64_t positionOf(int64_t step) const {
    return firstPosition + (step - firstStep) * program.batch;
  }
  /// Gives `target` the inputs of the batch at `position` (every row).
  absl::Status feedBatch(rt::TrainingSession &target,
                         const std::vector<std::vector<float>> &inputs);
  /// Writes the metrics line, the CSV row and the progress of one step;
  /// `usage` is what the process counted while the step ran.
  absl::Status recordStep(int64_t step,
                          const rt::TrainingSession::StepResult &result,
                          const ProcessUsage &usage,
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
  std::optional<ckpt::DirectoryLock> lock;
  /// The checkpoint --resume continues from, opened (manifest and file
  /// headers read) before compiling; its blocks are read into the session.
  std::unique_ptr<ckpt::CheckpointReader> resumed;
  /// --init-from's file, opened and matched against the step's arguments
  /// before compiling; its blocks are read into the session.
  std::optional<ckpt::ParameterImport> initFrom;
  /// The file the parameters start from: --init-from's, or the weights of
  /// pretrained_model_name_or_path's folder ("" for none).
  std::string initFromPath;
  /// The file's tensors the model computes, checked against its tables.
  std::vector<std::string> computedChecked;

  TrainProgram program;
  std::unique_ptr<rt::TrainingSession> session;
  const std::string model;
  /// --verify only: the global values the steps start from, which the
  /// one-device reference starts from too (no other path holds the global
  /// model). The first step's counter and the seed.
  std::vector<rt::HostTensor> start;
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

  /// Time to first step, by phase: building the step (MLIR), compiling and
  /// loading it, making the starting values, the first step; and the
  /// memory predicted for this process.
  const Clock::time_point runBegin = Clock::now();
  double buildSeconds = 0, compileSeconds = 0, restoreSeconds = 0;
  double firstStepAt = 0, firstStepSeconds = 0;
  ProcessMemory memory;

  /// This run's losses, and the loss curve of the whole run (a resumed
  /// run's CSV holds the steps before the checkpoint).
  std::vector<double> losses;
  std::vector<std::pair<int64_t, double>> curve;
  double totalSeconds = 0;
  /// What the process counted during the steps after this run's first
  /// (page faults, involuntary context switches, CPU time), and their
  /// seconds: the summary's line on how undisturbed the steps ran.
  ProcessUsage laterStepsUsage;
  double laterStepsSeconds = 0;
};

} // namespace mlir::sd::train

#endif // SD_LIB_DRIVER_TRAINRUNIMPL_H
