//===- TrainRun.h - A training run: steps, checkpoints, telemetry -*- C++ -*-===//
//
// What `sdrun` does once its flags and config file are resolved: build and
// load the training step (TrainProgram.h), start from seeded values, a
// safetensors file or the latest checkpoint, run the steps with a progress
// display, write checkpoints, metrics (JSONL, CSV, a loss plot), a Chrome
// trace, and optionally verify against one device and export the
// parameters.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_TRAINRUN_H
#define SD_DRIVER_TRAINRUN_H

#include "sd/Passes/Passes.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sd {

struct TrainRunOptions {
  /// The model file (for messages and the checkpoint's model identifier).
  std::string modelPath;
  /// The step to build: mesh, rules, batch, remat policy, optimizer.
  PipelineOptions pipeline;
  /// The mesh `pipeline.mesh` describes (one `data:1` axis without one).
  ::sd::MeshSpec mesh;
  /// Steps the run ends at (MaxDiffusion's max_train_steps: a resumed run
  /// runs the remaining ones).
  int64_t steps = 10;
  uint64_t seed = 0;
  bool verify = false;
  int threadsPerDevice = 0;
  int64_t deviceMemoryBudget = 0;
  int64_t hostMemoryBudget = 0;
  std::string cacheDir;
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
  std::string exportPath;
  /// A Chrome trace of `traceSteps` steps after the first `traceSkipSteps`
  /// of this run.
  std::string tracePath;
  int64_t traceSkipSteps = 0;
  int64_t traceSteps = 10;
  /// Lines printed under the run's header (what the config set that sd
  /// records but does not apply, ...).
  std::vector<std::string> notes;
};

/// Runs the training described by `options` on `module`. Errors are printed
/// (`sdrun: error: ...`, or as MLIR diagnostics on the module); returns the
/// process exit code. `compilerFailed` tells whether the MLIR diagnostic
/// handler already printed an error, so no second message is added.
int runTraining(ModuleOp module, const TrainRunOptions &options,
                llvm::function_ref<bool()> compilerFailed);

} // namespace mlir::sd

#endif // SD_DRIVER_TRAINRUN_H
