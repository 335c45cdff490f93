//===- Checkpoint.h - Sharded checkpoints of training sessions --*- C++ -*-===//
//
// A checkpoint of a TrainingSession is a step directory
//
//   DIR/step_00000010/device_0.safetensors ... device_<n-1>.safetensors
//   DIR/step_00000010/manifest.pb
//
// with one safetensors file per device of the mesh it was written on. A
// device's file holds, under each argument's name, the block of that
// argument the device owns: a block (a distinct set of coordinates on the
// mesh axes that split the tensor) is owned by the lowest-numbered device
// holding it, so replicated tensors are written once and a device may own
// nothing (its file is then a valid empty safetensors file). The manifest
// (lib/Checkpoint/Manifest.proto, binary protobuf) records the step, the
// mesh, the RNG state, the optimizer hyperparameters, the model, and for
// every tensor its global shape, sharding and blocks with their CRC-32s, and
// for every file its size and CRC-32. It is written last: a step directory
// without a manifest is an incomplete write and is ignored.
//
// Every file is written atomically (`.tmp`, fsync, rename, fsync of the
// directory). A checkpoint loads onto any mesh (resharding): a training run
// reads, for each block its process holds, the stored blocks that overlap
// it (CheckpointReader), never a whole tensor; loadCheckpoint assembles the
// global tensors for tools that want them (and for tests).
//
// Crash tests stop a write at a known point through
// CheckpointWriteOptions::atPoint (stallAt() waits there to be killed).
//
//===----------------------------------------------------------------------===//

#ifndef SD_CHECKPOINT_CHECKPOINT_H
#define SD_CHECKPOINT_CHECKPOINT_H

#include "sd/Runtime/Session.h"
#include "sd/Sharding/Mesh.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sd::ckpt {

/// The manifest format this library writes and reads.
constexpr uint32_t kFormatVersion = 1;

/// What the training loop keeps beside the tensors; the caller fills it.
struct CheckpointMeta {
  /// Optimizer steps taken (names the step directory).
  int64_t step = 0;
  /// RNG state: the run's seed, the data pipeline's seed, and how far the
  /// data stream has been consumed.
  uint64_t seed = 0;
  uint64_t dataSeed = 0;
  int64_t dataPosition = 0;
  /// The epoch of the data set that position is in.
  int64_t dataEpoch = 0;
  /// Identifies the model, e.g. "flux-tiny.mlir sha256:…".
  std::string model;
  /// Optimizer hyperparameters ("learning_rate", "adam_b1", ...).
  std::map<std::string, double> hyperparameters;
  /// Where the frozen parameters come from, which a checkpoint does not
  /// store ("init-from base.safetensors (1234 bytes)", "seed 0"); empty
  /// when every parameter is trained.
  std::string frozenFrom;
};

/// "step_00000010": the step directory's name of `step`.
std::string stepDirectoryName(int64_t step);

/// The points of a checkpoint write at which a test may interrupt it.
enum class WritePoint {
  /// Half of device 0's shard `.tmp` file is written (and fsynced).
  Shard,
  /// Every shard is in place and the manifest's `.tmp` file is written and
  /// fsynced, but not yet renamed: the step is not complete.
  Manifest,
};

/// "shard", "manifest".
const char *writePointName(WritePoint point);

/// How saveCheckpoint writes. The default is what a training run wants;
/// crash tests inject `atPoint`.
struct CheckpointWriteOptions {
  /// Called at each WritePoint, on the thread that reached it (device 0's
  /// writer thread for Shard). A test stops the write there, to kill the
  /// process at a known point (see stallAt).
  std::function<void(WritePoint)> atPoint;
};

/// A CheckpointWriteOptions::atPoint for crash tests: at `point` it prints
/// `sd: checkpoint write stalled at <name> (pid <pid>)` to stderr and waits
/// until the process is killed; other points pass.
std::function<void(WritePoint)> stallAt(WritePoint point);

/// Writes `session`'s arguments as checkpoint `meta.step` under `dir`
/// (created if missing): every device's shard file (in parallel, one thread
/// per device; each atomically), then the manifest (atomically), then fsyncs
/// the step directory and `dir`. AlreadyExists, writing nothing, when that
/// step already has a manifest. Leftovers of an earlier, interrupted write of
/// the step (`*.tmp` files, shard files) are replaced or removed.
/// InvalidArgument for a negative step; FailedPrecondition when the session
/// has no arguments; OS errors naming the file.
absl::Status saveCheckpoint(const std::string &dir,
                            rt::TrainingSession &session,
                            const CheckpointMeta &meta,
                            const CheckpointWriteOptions &options = {});

/// The step directories (full paths) of `dir` that have a manifest that
/// parses, oldest first (by step). Incomplete ones are skipped. An empty
/// list when `dir` does not exist.
absl::StatusOr<std::vector<std::string>>
listCheckpoints(const std::string &dir);

/// One global tensor of a checkpoint.
struct LoadedTensor {
  std::string name;
  rt::ArgumentKind kind = rt::ArgumentKind::Input;
  std::vector<int64_t> globalShape;
  /// Per dimension, the names of the mesh axes that split it when written.
  std::vector<std::vector<std::string>> sharding;
  /// Row-major, globalShape's elements.
  std::vector<float> values;
};

struct LoadedCheckpoint {
  /// The step directory.
  std::string path;
  CheckpointMeta meta;
  /// The mesh it was written on.
  MeshSpec mesh;
  /// Wall-clock time of the write, microseconds since the Unix epoch.
  int64_t writtenUnixMicros = 0;
  /// In the order of the writing session's arguments.
  std::vector<LoadedTensor> tensors;

  /// The tensor called `name`, or nullptr.
  const LoadedTensor *find(const std::string &name) const;
};

/// Reads the checkpoint in `stepDir`. Each shard file's size and CRC-32 are
/// checked against the manifest before its contents are used; each block's
/// CRC-32 is checked, and the blocks of each tensor must tile it exactly.
/// NotFound without a manifest; DataLoss for anything damaged, naming the
/// file: "checkpoint shard 'D/step_00000010/device_1.safetensors' is corrupt:
/// crc32 0x1234abcd != manifest's 0x89ef0123", "... is truncated: 100 bytes,
/// manifest says 120", "... is missing"; FailedPrecondition for a format
/// version this library does not read.
absl::StatusOr<LoadedCheckpoint> loadCheckpoint(const std::string &stepDir);

/// A checkpoint opened for reading only the blocks a process holds, on any
/// mesh (resharding): open() reads and verifies the manifest and checks each
/// shard file's size; readBlock() then reads, for the block it is asked
/// for, the stored blocks that overlap it, each streamed through in pieces
/// of at most 1 MiB with its CRC-32 checked against the manifest, keeping
/// only the overlap. On the mesh the checkpoint was written on every block
/// is read once, exactly; no tensor is ever assembled whole.
class CheckpointReader {
public:
  /// Errors as loadCheckpoint's for the manifest and the files' sizes.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>>
  open(const std::string &stepDir);
  ~CheckpointReader();

  const std::string &path() const { return stepDir; }
  const CheckpointMeta &meta() const { return checkpointMeta; }
  /// The mesh it was written on.
  const MeshSpec &mesh() const { return writtenMesh; }
  /// InvalidArgument (argumentsFromCheckpoint's messages) unless every
  /// argument of `spec` but its inputs has a tensor of its name and global
  /// shape here.
  absl::Status check(const rt::ProgramSpec &spec) const;
  /// Whether it holds a tensor called `name` of global shape `shape`.
  bool holds(const std::string &name, const std::vector<int64_t> &shape) const;
  /// Reads the block of tensor `name` at `offsets` of `shape` into `out`.
  /// DataLoss naming the shard file when a stored block's CRC-32 differs
  /// from the manifest's or a file is shorter than it says.
  absl::Status readBlock(const std::string &name,
                         const std::vector<int64_t> &offsets,
                         const std::vector<int64_t> &shape, float *out) const;
  /// Bytes read from the shard files so far.
  int64_t bytesRead() const;

private:
  struct Impl;
  CheckpointReader(std::string stepDir, std::unique_ptr<Impl> impl);
  std::string stepDir;
  CheckpointMeta checkpointMeta;
  MeshSpec writtenMesh;
  std::unique_ptr<Impl> impl;
};

/// The global values of `spec`'s arguments (in argument order, for
/// TrainingSession::setArguments on any mesh), matched by name in `ckpt`.
/// InvalidArgument naming the tensor when one is missing or its global shape
/// differs (with both shapes).
absl::StatusOr<std::vector<rt::HostTensor>>
argumentsFromCheckpoint(const LoadedCheckpoint &ckpt,
                        const rt::ProgramSpec &spec);

} // namespace sd::ckpt

#endif // SD_CHECKPOINT_CHECKPOINT_H
