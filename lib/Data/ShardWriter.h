//===- ShardWriter.h - A dataset shard, sample by sample --------*- C++ -*-===//
//
// A safetensors shard holds [k, ...] tensors whose k is known only when the
// shard is full or the dataset ends, and the header (with k in every shape
// and offset) comes first in the file. So that a shard of 4096 samples of
// 192 MiB each is never in memory, ShardWriter reserves the header's room
// for the shard's largest count, writes each sample's values straight after
// it, and writes the header, padded with spaces (as the format allows), when
// the shard is finished. Labels (4 bytes a sample) wait in memory and
// embeddings in an unlinked side file; both follow the samples then.
// Private to lib/Data: DatasetWriter's.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_DATA_SHARDWRITER_H
#define SD_LIB_DATA_SHARDWRITER_H

#include "sd/Data/Dataset.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace sd::data {

class ShardWriter {
public:
  /// Starts the shard file `path` for at most `capacity` samples of the
  /// features `index` describes, with `metadata` in its header.
  static absl::StatusOr<std::unique_ptr<ShardWriter>>
  create(const std::string &path, const DatasetIndex &index, int64_t capacity,
         const std::map<std::string, std::string> &metadata);

  ShardWriter(const ShardWriter &) = delete;
  ShardWriter &operator=(const ShardWriter &) = delete;
  ~ShardWriter();

  /// Appends one sample (checked by the caller: sizes, label, finiteness).
  absl::Status add(absl::Span<const float> sample, std::optional<int64_t> label,
                   absl::Span<const float> embedding);

  int64_t count() const { return samples; }

  /// Writes the labels, the embeddings and the header, and fsyncs the file;
  /// returns the file's size and CRC-32 in `shard` (whose count is set).
  absl::Status finish(ShardInfo &shard);

private:
  ShardWriter(std::string path, const DatasetIndex &index, int64_t capacity,
              std::map<std::string, std::string> metadata);

  /// The header for `count` samples, unpadded.
  std::string header(int64_t count) const;
  /// Writes `size` bytes at the end of the file, updating the CRC.
  absl::Status append(const char *bytes, size_t size);

  std::string path;
  std::string feature;
  std::vector<int64_t> sampleShape;
  std::optional<std::vector<int64_t>> embeddingShape;
  bool hasLabels;
  int64_t capacity;
  std::map<std::string, std::string> metadata;
  /// The header's room: the header for `capacity` samples, padded to 8.
  uint64_t reserved = 0;
  int fd = -1;
  /// The side file of embeddings (unlinked; gone when closed).
  int embeddingFd = -1;
  int64_t samples = 0;
  std::vector<float> labels;
  /// Bytes after the header written so far, and their CRC-32.
  uint64_t written = 0;
  uint32_t crc = 0;
};

} // namespace sd::data

#endif // SD_LIB_DATA_SHARDWRITER_H
