//===- Exchange.h - Parameters in and out as plain safetensors ---*- C++
//-*-===//
//
// What a training run trades with the world besides its checkpoints:
// `--init-from` reads parameters by name from a safetensors file (only the
// bytes of the blocks each process holds), `--export` writes them (one
// tensor at a time, through process 0), and the checkpoint directory's
// lock keeps two runs out of one directory.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CHECKPOINT_EXCHANGE_H
#define SD_CHECKPOINT_EXCHANGE_H

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Runtime/Session.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sd::ckpt {

/// A safetensors file matched against a step's arguments by name: each
/// Parameter, and the EMA state of each parameter the file has, takes the
/// tensor of its parameter's name. Only the header has been read.
/// The metadata entry of sd's exports whose weights have the reference
/// implementations' layouts (PyTorch's Linear [out, in], fused projections
/// [k·out, in], conv patch embeddings): `sd_layout: reference`.
inline constexpr const char *kLayoutKey = "sd_layout";
inline constexpr const char *kLayoutReference = "reference";

/// OK unless `metadata` is that of an export by an older sd (its "model"
/// and "step" entries without kLayoutKey), whose Linear weights are
/// [in, out]: a square one would otherwise load transposed without a word.
/// InvalidArgument naming `path` and what to do.
absl::Status checkLayoutOf(const std::string &path,
                           const std::map<std::string, std::string> &metadata);

struct ParameterImport {
  /// What was opened: a safetensors file, or a sharded checkpoint's
  /// `*.safetensors.index.json` (diffusers' form).
  std::string path;
  /// The file, or the index's shards in the order they are named.
  std::vector<std::unique_ptr<SafetensorsReader>> readers;
  /// Per argument of the step, the file's tensor or null, and the reader
  /// that holds it.
  std::vector<const SafetensorsTensor *> tensors;
  std::vector<const SafetensorsReader *> tensorReaders;
  /// Parameters loaded, and those the file lacks (which keep their
  /// seeded values); the file's tensors the step does not have.
  int64_t loaded = 0;
  std::vector<std::string> missing, unused;
};

/// A diffusers sharded checkpoint's index (`*.safetensors.index.json`): its
/// shard files (beside it, in name order) and the tensors its `weight_map`
/// puts in each. InvalidArgument naming `path` when it is not JSON, has no
/// weight_map object, or names a file elsewhere; the file's own errors.
struct ShardIndex {
  std::vector<std::string> files;
  std::map<std::string, std::vector<std::string>> tensorsOf;
};
absl::StatusOr<ShardIndex> readShardIndex(const std::string &path);

/// Opens `path` and matches it against `spec`: a safetensors file, or a
/// `*.safetensors.index.json` whose `weight_map` names each tensor's shard
/// (files beside it), each shard's tensors checked against the map.
/// InvalidArgument naming the tensor and both shapes when a shape differs,
/// or when the file has none of the parameters; the reader's errors for
/// the file itself, and the index's (malformed, a shard missing or not
/// holding what the map says) naming it.
absl::StatusOr<ParameterImport>
openParameterImport(const std::string &path, const rt::ProgramSpec &spec);

/// Reads argument `index` (`arg`)'s block at `offsets` from its tensor in
/// `import`; a NaN or infinite weight (which would train silently to a NaN
/// loss) is InvalidArgument naming the tensor and its global element.
absl::Status readImportedBlock(const ParameterImport &import, size_t index,
                               const rt::ArgumentSpec &arg,
                               const std::vector<int64_t> &offsets, float *out);

/// What --export writes: the parameters, or their moving averages (the
/// step's EMA states) under the parameters' names (a frozen parameter, which
/// has no EMA, as it is).
enum class ExportedValues { Parameters, Ema };

/// Which parameters: the whole model; the trained ones alone (LoRA's
/// adapters, under PEFT's names `X.lora_A.weight`, `X.lora_B.weight`); or
/// the model with each LoRA pair merged into its base weight,
/// `X.weight + scale·B·A`.
enum class ExportedTensors { Model, Trained, Merged };

/// The safetensors metadata key under which exported LoRA adapters carry
/// their PEFT config (JSON: r, lora_alpha, target_modules), as diffusers
/// names it.
inline constexpr const char *kLoraMetadataKey = "lora_adapter_metadata";

/// `base` [out..., in] (row-major, `outSize`·`inSize` elements) +=
/// scale·B·A for B [out, rank] and A [rank, in]: a LoRA pair merged.
void mergeLoraPair(float *base, const float *a, const float *b, int64_t outSize,
                   int64_t inSize, int64_t rank, double scale);

/// Writes `values` of `session` to a safetensors file with `metadata`, in
/// BF16 when `bf16` (rounded from the f32 values), else F32, one
/// tensor at a time: each is gathered (every process takes part) and
/// process 0 appends it to the file (written beside it and renamed into
/// place at the end) and drops it, so no process holds more than one whole
/// tensor. Other processes write nothing; when process 0 cannot write, it
/// still takes part in every gather, then fails.
absl::Status exportParameters(
    rt::TrainingSession &session, const std::string &path,
    ExportedValues values, const std::map<std::string, std::string> &metadata,
    bool bf16 = false, ExportedTensors tensors = ExportedTensors::Model,
    double loraScale = 1.0);

/// An exclusive lock on a checkpoint directory (its `.lock` file, flock),
/// held until destroyed.
class DirectoryLock {
public:
  /// FailedPrecondition naming the directory when another process holds
  /// it.
  static absl::StatusOr<DirectoryLock> acquire(const std::string &dir);
  DirectoryLock(DirectoryLock &&other) noexcept : fd(other.fd) {
    other.fd = -1;
  }
  DirectoryLock &operator=(DirectoryLock &&other) noexcept;
  ~DirectoryLock();

private:
  explicit DirectoryLock(int fd) : fd(fd) {}
  int fd = -1;
};

} // namespace sd::ckpt

#endif // SD_CHECKPOINT_EXCHANGE_H
