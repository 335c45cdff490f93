//===- Dataset.h - sd's on-disk training datasets ---------------*- C++ -*-===//
//
// A dataset is a directory: `index.json` says what it holds (name, source,
// classes, per-sample feature shapes, and per split the shard files with
// their sample counts, sizes and CRC-32s); the samples themselves are in
// safetensors shards, each holding a contiguous range of one split's samples
// (`images` or `latents` [k, H, W, C] (video latents [k, F, H, W, C]),
// `labels` [k], optionally `embeddings` [k, L, D] and `pooled_embeddings`
// [k, P], all F32). docs/data.md describes the format.
//
// This header reads and checks datasets; DatasetWriter.h writes them. No MLIR
// here: sdrun's loader and the runtime side link this library.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_DATASET_H
#define SD_DATA_DATASET_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sd::data {

/// The index's `format` and `version`.
inline constexpr const char *kDatasetFormat = "sd-dataset";
inline constexpr int64_t kDatasetVersion = 1;
/// The index's file name inside the dataset directory.
inline constexpr const char *kIndexFileName = "index.json";
/// The largest index read: about 150 bytes a shard, so 64 MiB lists
/// hundreds of thousands of shards.
inline constexpr uint64_t kMaxIndexFileBytes = uint64_t(64) << 20;

/// One shard file of a split.
struct ShardInfo {
  /// A plain file name inside the dataset directory (no '/').
  std::string file;
  int64_t count = 0;
  int64_t sizeBytes = 0;
  /// zlib's CRC-32 of all the file's bytes.
  uint32_t crc32 = 0;
};

/// A split ("train", "heldout", ...): its samples, shard after shard.
struct SplitInfo {
  int64_t count = 0;
  std::vector<ShardInfo> shards;
};

/// A parsed index.json.
struct DatasetIndex {
  /// The directory the index was read from (not stored in the index).
  std::string dir;
  std::string name;
  /// How the dataset was made (free text).
  std::string source;
  /// The per-sample tensor: "images" (pixels, `range` set) or "latents".
  std::string sampleFeature = "images";
  /// [H, W, C] of one sample, channels last; latents may be video,
  /// [F, H, W, C].
  std::vector<int64_t> sampleShape;
  /// The values' range, [-1, 1] for images; unset for latents without one.
  std::optional<std::array<double, 2>> range;
  /// Whether samples have class labels (the `labels` feature).
  bool hasLabels = true;
  /// Class names, index = label; num_classes is their count (0 without
  /// labels).
  std::vector<std::string> classNames;
  /// [L, D] of one sample's cached text-encoder output, when present.
  std::optional<std::vector<int64_t>> embeddingShape;
  /// [P] of one sample's pooled text vector (Flux's CLIP projection), when
  /// present.
  std::optional<std::vector<int64_t>> pooledShape;
  /// By name; std::map, so that every listing is in name order.
  std::map<std::string, SplitInfo> splits;

  /// H × W × C.
  int64_t sampleElements() const;
  /// L × D, or 0 without embeddings.
  int64_t embeddingElements() const;
  /// P, or 0 without pooled embeddings.
  int64_t pooledElements() const;
  /// The split called `name`, or nullptr.
  const SplitInfo *findSplit(std::string_view name) const;
  /// `dir`/`file`.
  std::string shardPath(const ShardInfo &shard) const;
};

/// The index as pretty-printed JSON (llvm::json), keys in the order
/// docs/data.md shows.
std::string formatDatasetIndex(const DatasetIndex &index);

/// Parses index JSON; `fileName` names it in errors. Checks the format,
/// version, feature shapes, class names and that each split's count is the
/// sum of its shards' counts. InvalidArgument naming the file and the field.
absl::StatusOr<DatasetIndex> parseDatasetIndex(std::string_view json,
                                               const std::string &fileName);

/// Reads `dir`/index.json; NotFound when the directory holds none,
/// InvalidArgument when it is not a regular file of at most
/// kMaxIndexFileBytes (sd::readRegularFile).
absl::StatusOr<DatasetIndex> readDatasetIndex(const std::string &dir);

/// Writes `index` to `dir`/index.json atomically (index.json.tmp, fsync,
/// rename, fsync of the directory).
absl::Status writeDatasetIndex(const DatasetIndex &index,
                               const std::string &dir);

/// Checks every shard of every split: it exists (NotFound), has the index's
/// size (DataLoss: "... is truncated: X bytes, index says Y"), with
/// `checksums` its CRC-32 matches (DataLoss: "... is corrupt: crc32 0x..
/// != index's 0x.."), its labels are class indices and its samples and
/// embeddings finite (InvalidArgument naming the sample and its split), and
/// its tensors have the index's dtype and shapes (InvalidArgument naming the
/// tensor, the file and both shapes). Stops at the first problem; every message
/// names the shard's path.
absl::Status verifyDataset(const DatasetIndex &index, bool checksums = true);

/// Reads samples of one split by global index, for a loader. The shards are
/// memory-mapped when the reader opens (checking their sizes and tensor
/// shapes, not their checksums: call verifyDataset first), so a read copies
/// only the samples asked for. Nothing changes after open(), so one reader
/// may serve several threads at once.
class DatasetReader {
public:
  /// Opens `split` of `index`; NotFound for an unknown split, and the errors
  /// of verifyDataset (without checksums) for a bad shard.
  static absl::StatusOr<DatasetReader> open(const DatasetIndex &index,
                                            const std::string &split);

  DatasetReader(DatasetReader &&) noexcept;
  DatasetReader &operator=(DatasetReader &&) noexcept;
  ~DatasetReader();

  /// Samples in the split.
  int64_t size() const;
  /// Floats per sample (H × W × C), per embedding (L × D, 0 without) and
  /// per pooled embedding (P, 0 without).
  int64_t sampleElements() const;
  int64_t embeddingElements() const;
  int64_t pooledElements() const;

  /// Copies the samples at `indices` (global in the split, any order,
  /// repeats allowed) to `samples` (indices.size() × sampleElements()
  /// floats), their labels to `labels` (one float each) and embeddings to
  /// `embeddings` and pooled embeddings to `pooled`, in the order of
  /// `indices`. Any output may be null to skip it. OutOfRange for an index
  /// outside [0, size()); InvalidArgument when `labels`, `embeddings` or
  /// `pooled` is asked of a dataset without them, or (naming the shard) when
  /// a label read is not a class index or a value read is not finite.
  absl::Status readSamples(absl::Span<const int64_t> indices, float *samples,
                           float *labels, float *embeddings,
                           float *pooled = nullptr) const;

private:
  struct Impl;
  explicit DatasetReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Formats a CRC-32 as the index stores it: "0x" and 8 lowercase hex digits.
std::string formatCrc32(uint32_t crc);

/// "[a, b, c]".
std::string formatShape(absl::Span<const int64_t> shape);

} // namespace sd::data

#endif // SD_DATA_DATASET_H
