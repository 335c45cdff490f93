//===- TrainProgram.h - From a model to a runnable training step -*- C++ -*-===//
//
// What sdrun does before it runs anything: build the training step of a
// model (sd-differentiate), shard and partition it for the mesh, lower the
// per-device program to C++ (sd-lower-to-openmp), and describe its arguments
// to the runtime (`sd::rt::ProgramSpec`). Also the seeded global values of
// the step's arguments (sd/Evaluator/Evaluator.h's initialization), which do
// not depend on the mesh.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_TRAINPROGRAM_H
#define SD_DRIVER_TRAINPROGRAM_H

#include "sd/Passes/Passes.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Runtime.h"
#include "sd/Runtime/Session.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlir::sd {

/// What one device of a program holds at its peak, in bytes: its arguments
/// (the cost model's figures) and what the emitted program allocates beside
/// them (sd/Target/OpenMP/OpenMPEmitter.h's ProgramMemory).
struct DeviceMemory {
  int64_t parameters = 0;
  int64_t optimizerState = 0;
  int64_t inputs = 0;
  /// The program's own buffers at their peak: the activations it stores,
  /// gradients, temporaries and results.
  int64_t activationPeak = 0;
  /// Values offloaded to host memory at their peak.
  int64_t hostPeak = 0;
  /// The largest of the program's buffers live at its activation peak
  /// (what they hold, bytes), largest first; empty without an emitted
  /// program.
  std::vector<std::pair<std::string, int64_t>> peakBuffers;
  int64_t total() const {
    return parameters + optimizerState + inputs + activationPeak + hostPeak;
  }
};

struct TrainProgram {
  /// The C++ program every device runs (files in split-file form).
  std::string source;
  ::sd::rt::ProgramSpec spec;
  /// The mesh the program was partitioned for (one `data:1` axis without
  /// one).
  ::sd::MeshSpec mesh;
  /// The global batch of one step.
  int64_t batch = 0;
  /// FLOPs of one step of the whole (unpartitioned) model, recomputation
  /// included: what "model FLOPs" means in the metrics.
  int64_t modelFlops = 0;
  /// The compiler's per-device communication estimate for one step.
  int64_t predictedCommBytes = 0;
  /// Its collectives per set of mesh axes, priced by the options' network.
  std::vector<AxisCommunication> predictedCommunication;
  /// One device's predicted memory.
  DeviceMemory memory;
};

/// How a program is compiled and run (sdrun's settings of the same names).
struct DeviceSettings {
  int threadsPerDevice = 0;
  int64_t deviceMemoryBudget = 0;
  int64_t hostMemoryBudget = 0;
  /// The most resident memory this process may be predicted to use (0: the
  /// machine's memory over the processes on it).
  int64_t processMemoryLimit = 0;
  std::string cacheDir;
  /// One process of a multi-process mesh (an MPI rank); -1 runs every
  /// device here. Used only for a program whose mesh has several processes.
  int64_t process = -1;
  ::sd::rt::TransportFactory transportFactory;
  std::shared_ptr<::sd::rt::ProcessGroup> processGroup;
  /// Print what is compiled (a line a file) and how long it took.
  bool printCompilation = true;
};

/// Compiles a program's C++ `source` (or finds it in the cache), printing
/// each file as it finishes and the time it took with
/// `settings.printCompilation`.
absl::StatusOr<::sd::rt::CompiledProgram>
compileDeviceProgram(const std::string &source,
                     const DeviceSettings &settings);

/// Compiles and loads `program` and creates its session on `program.mesh`
/// (without arguments).
absl::StatusOr<std::unique_ptr<::sd::rt::TrainingSession>>
startProgramSession(const TrainProgram &program,
                    const DeviceSettings &settings);

/// Builds the training step of `module` (left unchanged) with `options`
/// (`options.train` is implied; an empty mesh builds the single-device
/// step). Fails after an error on the module.
FailureOr<TrainProgram> buildTrainProgram(ModuleOp module,
                                          const PipelineOptions &options);

/// The forward program of the model function `function` (@loss for a
/// held-out loss, @denoise for a sampler): the default pipeline without
/// training, partitioned for `options.mesh` (one device without), lowered
/// to the runtime's C++. A function returning tensors has them kept by the
/// session (ProgramSpec::keepResults); one returning the scalar loss
/// reports it as a training step does. `modelFlops` is left 0.
FailureOr<TrainProgram> buildModelProgram(ModuleOp module,
                                          const PipelineOptions &options,
                                          StringRef function);

} // namespace mlir::sd

#endif // SD_DRIVER_TRAINPROGRAM_H
