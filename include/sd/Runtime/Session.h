//===- Session.h - Running a compiled training step on a mesh ---*- C++ -*-===//
//
// A training session owns what a training run keeps between steps: the mesh
// runtime, the loaded device program, and on every device its blocks of the
// step's arguments (parameters, optimizer state, batch, step counter) in that
// device's memory pool. A step runs the program on every device at once and
// replaces each donated argument (`sd.aliases`) by the result it was donated
// to, as JAX does with donated buffers.
//
// What the session needs to know about the program comes as a plain
// `ProgramSpec`, which the compiler side (sd/Driver/TrainProgram.h) extracts
// from the partitioned function, so this file has no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_SESSION_H
#define SD_RUNTIME_SESSION_H

#include "sd/Runtime/ArgumentSpec.h"
#include "sd/Runtime/HostTensor.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Runtime.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sd::rt {

/// Copies the block of the device at `coords` of a global row-major tensor
/// of `spec` (of its element type) into `local` (localShape elements), or
/// back (`toGlobal`; only then is `global` written).
void copyBlock(const ArgumentSpec &spec, const std::vector<int64_t> &coords,
               void *global, void *local, bool toGlobal);

class TrainingSession {
public:
  /// Checks that the spec fits the mesh (each global dimension is the local
  /// one times its axes' sizes), that no two results are donated into one
  /// argument, that the loss result exists and is not donated, and that the
  /// program's signature has the spec's arguments and results with their
  /// element types (an f32 loss).
  static absl::StatusOr<std::unique_ptr<TrainingSession>>
  create(MeshRuntimeOptions options, ProgramSpec spec,
         std::unique_ptr<LoadedProgram> program);
  ~TrainingSession();

  /// Gives every device its blocks of the global arguments (one row-major
  /// tensor per argument, of its global shape and element type), in device
  /// memory, replacing any it had. InvalidArgument for a tensor of another
  /// size or element type; the out-of-memory error of the first device that
  /// cannot hold them, after which the session has no arguments.
  absl::Status setArguments(const std::vector<HostTensor> &globals);

  /// Makes one device's block of argument `index` in `out` (its localShape
  /// elements of its element type, row-major); `coords` are the device's
  /// mesh coordinates (ArgumentSpec::blockOffsets gives the block's place in
  /// the tensor). Called from the devices' threads at once, one block per
  /// call.
  using BlockFiller = std::function<absl::Status(
      int64_t index, const std::vector<int64_t> &coords, Block out)>;

  /// Gives every device its blocks of every argument, in device memory,
  /// replacing any it had: `fill` makes each distinct block this process
  /// holds once (devices holding the same block get a copy), so nothing
  /// global is ever made. The first error of `fill`, or the out-of-memory
  /// error of the first device that cannot hold its blocks; the session then
  /// has no arguments.
  absl::Status fillArguments(const BlockFiller &fill);

  /// Replaces argument `index`'s blocks on every device of this runtime
  /// with those of `global` (its global row-major value; only the blocks
  /// this process's devices hold are read), in the buffers they have:
  /// what a training loop does with each step's batch. FailedPrecondition
  /// without arguments; OutOfRange for a bad index; InvalidArgument for a
  /// wrong element count or element type.
  absl::Status setArgument(int64_t index, const HostTensor &global);

  struct StepResult {
    /// The loss of device 0 (all devices hold the same value).
    double loss = 0;
    double seconds = 0;
  };
  /// Runs one step with the step counter set to `stepsTaken` (the number of
  /// optimizer steps taken before this one). A failed step (out of memory,
  /// a failing device) leaves donated arguments half-updated: the session
  /// then releases everything in the devices' pools and has no arguments
  /// (FailedPrecondition) until setArguments is called again.
  absl::StatusOr<StepResult> step(int64_t stepsTaken);

  /// The global value of argument `index`, assembled from the devices'
  /// blocks; DataLoss when the devices holding the same block disagree.
  absl::StatusOr<HostTensor> gatherArgument(int64_t index);

  /// The global value of result `index` of the last step (with
  /// ProgramSpec::keepResults), assembled like gatherArgument's.
  /// FailedPrecondition before a step or without keepResults.
  absl::StatusOr<HostTensor> gatherResult(int64_t index);

  /// Device `device`'s block of argument `index` (localShape elements,
  /// row-major), valid until the next step or setArguments; FailedPrecondition
  /// without arguments, OutOfRange for a bad index.
  absl::StatusOr<ConstBlock> deviceBlock(int64_t device, int64_t index);

  const ProgramSpec &spec() const { return programSpec; }
  MeshRuntime &runtime() { return *mesh; }
  /// The most device (host) memory any device had live at once.
  int64_t peakDeviceBytes();
  int64_t peakHostBytes();
  /// Collective bytes the busiest device sent in the last step.
  int64_t lastStepCommBytes() const { return lastCommBytes; }

private:
  TrainingSession(std::unique_ptr<MeshRuntime> mesh, ProgramSpec spec,
                  std::unique_ptr<LoadedProgram> program);
  void releaseArguments();
  void releaseResults();
  /// The global tensor of `spec` from every device's block (`blockOf` of
  /// this runtime's local device index), across processes with a process
  /// group; DataLoss when replicas differ.
  absl::StatusOr<HostTensor>
  gatherBlocks(const ArgumentSpec &spec,
               const std::function<const void *(int64_t)> &blockOf);
  /// InvalidArgument unless `global` has argument `index`'s global element
  /// count and element type.
  absl::Status checkGlobal(int64_t index, const HostTensor &global) const;
  void resetAfterFailure();
  /// `device`'s index among this runtime's devices (its id without a
  /// process of a multi-process mesh).
  int64_t local(const Device &device) const {
    return device.id() - mesh->firstDeviceId();
  }
  std::unique_ptr<MeshRuntime> mesh;
  ProgramSpec programSpec;
  std::unique_ptr<LoadedProgram> program;
  /// buffers[device][argument] by local device index, from the device's
  /// pool.
  std::vector<std::vector<void *>> buffers;
  /// kept[device][result] after a step with keepResults (null for donated
  /// results).
  std::vector<std::vector<void *>> kept;
  int64_t lastCommBytes = 0;
};

/// How far the parameters of one session are from another's.
struct ParameterComparison {
  /// The largest |actual - expected| over all parameter elements divided by
  /// the largest |expected| over all parameter elements.
  double relativeDifference = 0;
  /// The parameter holding the largest difference; empty when all are equal.
  std::string worstTensor;
  /// False when an element of either session is NaN or infinite.
  bool finite = true;
};

/// Compares the Parameter arguments of two sessions (e.g. a mesh's against
/// one device's). InvalidArgument when the specs do not have the same
/// arguments (names and global shapes); the errors of gatherArgument.
absl::StatusOr<ParameterComparison>
compareParameters(TrainingSession &actual, TrainingSession &expected);

} // namespace sd::rt

#endif // SD_RUNTIME_SESSION_H
