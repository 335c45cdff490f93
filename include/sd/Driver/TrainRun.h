//===- TrainRun.h - A training run in phases --------------------*- C++ -*-===//
//
// What `sdrun` does once its flags and config file are resolved: build and
// load the training step (TrainProgram.h), start from seeded values, a
// safetensors file or the latest checkpoint, run the steps with a progress
// display, write checkpoints, metrics (JSONL, CSV, a loss plot), a Chrome
// trace, and optionally verify against one device and export the
// parameters.
//
// The run's display (the header, the progress line, checkpoint and output
// lines, warnings) is printed as it goes; errors come back as an
// absl::Status for the tool to print.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_TRAINRUN_H
#define SD_DRIVER_TRAINRUN_H

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Data/Batches.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/Passes/Passes.h"
#include "sd/Runtime/Runtime.h"
#include "sd/Sharding/Mesh.h"
#include "sd/Support/ToolMain.h"

#include "mlir/IR/BuiltinOps.h"

#include "absl/status/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sd {

/// What the steps train on (MaxDiffusion's dataset_type, as sd reads it).
enum class DatasetType {
  /// A generated data set of one global batch (fresh noise each step).
  Synthetic,
  /// A directory sddata wrote (train_data_dir).
  Sd,
};

struct TrainRunOptions {
  /// The model file (for messages and the checkpoint's model identifier).
  std::string modelPath;
  /// The step to build: mesh, rules, batch, remat policy, optimizer.
  PipelineOptions pipeline;
  /// The mesh `pipeline.mesh` describes (one `data:1` axis without one).
  ::sd::MeshSpec mesh;
  /// Only build and compile the device program (sdrun --compile-only).
  bool compileOnly = false;
  /// Steps the run ends at (MaxDiffusion's max_train_steps: a resumed run
  /// runs the remaining ones).
  int64_t steps = 10;
  uint64_t seed = 0;
  bool verify = false;
  /// Go on after a non-finite loss instead of stopping before the step's
  /// results are checkpointed or exported.
  bool allowNonfiniteLoss = false;
  /// Threads, budgets, the program cache, and for one process of a
  /// multi-process mesh (an MPI rank) its index, the transport that reaches
  /// the other processes and the host's messages to them (gathers for
  /// --export and --verify, checkpoint agreement); only process 0 writes
  /// files.
  DeviceSettings device;
  /// JSON lines, one per step ("" for none).
  std::string metricsPath;
  /// output_dir/run_name: metrics.csv and loss.png ("" for none).
  std::string runDir;
  std::string runName;
  /// Checkpoints: every `checkpointEvery` steps (0: only at the end) and at
  /// the end of the run, when `checkpointDir` is set.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  bool resume = false;
  std::string initFrom;
  /// pretrained_model_name_or_path: a local diffusers model folder whose
  /// config is checked against the model and whose weights load as
  /// --init-from's; `pretrainedOrigin` is where it was set.
  std::string pretrained, pretrainedOrigin;
  /// Parameters --init-from's file lacks keep their seeded values instead
  /// of failing the run.
  bool allowMissing = false;
  std::string exportPath;
  /// The EMA parameters (the step's ema states) under the parameters'
  /// names.
  std::string exportEmaPath;
  /// With LoRA: --export writes the adapters alone; this, the model with
  /// them merged (scaled by loraScale).
  std::string exportMergedPath;
  double loraScale = 1.0;
  /// Both exports store BF16 (rounded from the f32 master), else F32.
  bool exportBF16 = false;
  /// What the steps train on (sd/Data/Batches.h): synthetic data or
  /// `trainDataDir`; labels dropped to the null class with
  /// `classDropoutProb`; the held-out loss every `evalEvery` steps (0:
  /// never).
  DatasetType datasetType = DatasetType::Synthetic;
  std::string trainDataDir;
  double classDropoutProb = 0;
  /// How a flow model's timesteps are drawn (timestep_sampling), with
  /// logit_mean and logit_std, or flow_shift.
  ::sd::data::TimestepSampling timestepSampling =
      ::sd::data::TimestepSampling::Uniform;
  double logitMean = 0, logitStd = 1, flowShift = 1;
  /// timestep_bias, applied to uniform timesteps.
  ::sd::data::TimestepBias timestepBias;
  int64_t evalEvery = 0;
  /// The config's prediction_type ("" when not given): it must be what the
  /// model predicts (@loss's sd.prediction_type).
  std::string predictionType;
  /// The config's resolution and norm_num_groups (0 when not given) and
  /// where they were set: a UNet program must have them (its latents × 8,
  /// its group norms).
  int64_t resolution = 0, normNumGroups = 0;
  std::string resolutionOrigin, normNumGroupsOrigin;
  /// A Chrome trace of `traceSteps` steps after the first `traceSkipSteps`
  /// of this run.
  std::string tracePath;
  int64_t traceSkipSteps = 0;
  int64_t traceSteps = 10;
  /// Lines printed under the run's header (what the config set that sd
  /// records but does not apply, ...).
  std::vector<std::string> notes;
};

/// What tests inject into a run (production runs leave them empty).
struct TrainRunHooks {
  /// Passed to every checkpoint write: crash tests stop a write at a known
  /// point (sdrun's hidden --test-checkpoint-stall).
  ::sd::ckpt::CheckpointWriteOptions checkpointWrite;
};

/// Runs the training described by `options` on `module`, in phases:
/// preflight (output paths, the checkpoint directory's lock), the checkpoint
/// to resume from, compile, the starting values, the steps (with their
/// checkpoints), the outputs (metrics, loss plot, trace, export) and
/// verification. Each error is returned as it happens, with the message the
/// tool prints after `sdrun: error: `, except those isReportedFailure()
/// recognizes. The display is flushed on return.
absl::Status runTraining(ModuleOp module, const TrainRunOptions &options,
                         const TrainRunHooks &hooks = {});

/// A failure the run has already shown, so the tool prints nothing more
/// (sd/Support/ToolMain.h): an error the compiler reported as an MLIR
/// diagnostic, or --verify's `verify: FAILED` line.
using ::sd::isReportedFailure;
using ::sd::reportedFailure;

} // namespace mlir::sd

#endif // SD_DRIVER_TRAINRUN_H
