//===- DatasetWriter.h - Writing sd datasets sample by sample ---*- C++ -*-===//
//
// Builders (sddata's digits and image folders, or a user's own C++ code)
// add samples one at a time; each goes straight into its split's open shard
// file, so neither a dataset nor a shard needs to fit in memory (one sample
// of 4096×4096×3 floats is 192 MiB). The dataset is built in a directory
// beside the target (`.NAME.sddata-XXXXXX` in the same parent) and put in
// place by a rename when it is complete, so a build that fails or is killed
// leaves whatever was at the target exactly as it was.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_DATASETWRITER_H
#define SD_DATA_DATASETWRITER_H

#include "sd/Data/Dataset.h"

#include <memory>

namespace sd::data {

class BuildDirectory;
class ShardWriter;

struct DatasetWriterOptions {
  /// At most this many samples per shard.
  int64_t shardSize = 4096;
  /// Write into a directory that holds another dataset (a different name)
  /// or files that are not a dataset.
  bool force = false;
};

/// Checks that `fraction` (of samples held out) is in [0, 1).
absl::Status checkHeldoutFraction(double fraction);

class DatasetWriter {
public:
  /// Starts writing the dataset `header` describes (name, source, classes,
  /// features, and the names of its splits, whose counts and shards the
  /// writer fills) into `dir`:
  /// - a missing directory is created at finish(), an empty one replaced;
  /// - one that holds a dataset of the same name is rebuilt: it stays as it
  ///   is until finish() swaps the new one in and removes the old index and
  ///   shards;
  /// - one that holds a dataset of another name, or other files, is refused
  ///   (FailedPrecondition) unless `options.force`; files that are not the
  ///   old dataset's index or shards are moved into the new one.
  /// InvalidArgument for a bad header or shard size. A writer destroyed
  /// before finish() removes what it built and leaves `dir` alone.
  static absl::StatusOr<DatasetWriter> create(const std::string &dir,
                                              DatasetIndex header,
                                              const DatasetWriterOptions &options);

  /// Appends one sample to `split`: `sample` has sampleElements() floats,
  /// `label` is a class index exactly when the dataset has labels, and
  /// `embedding` has embeddingElements() floats (empty without embeddings),
  /// all finite (InvalidArgument naming the sample and the split). Finishes
  /// the split's shard when it is full.
  absl::Status add(const std::string &split, absl::Span<const float> sample,
                   std::optional<int64_t> label,
                   absl::Span<const float> embedding = {});

  /// The index's `source`, which a builder may complete before finish()
  /// with what it learned while writing.
  const std::string &source() const { return index.source; }
  void setSource(std::string source) { index.source = std::move(source); }

  /// Finishes the open shards, writes the index and puts the dataset in
  /// place of `dir`; returns the index (with `dir` set). The writer is done
  /// afterwards, whether this succeeds or not.
  absl::StatusOr<DatasetIndex> finish();

  DatasetWriter(DatasetWriter &&) noexcept;
  DatasetWriter &operator=(DatasetWriter &&) noexcept;
  ~DatasetWriter();

private:
  DatasetWriter(DatasetIndex index, const DatasetWriterOptions &options);
  /// Finishes `split`'s open shard and adds it to the index.
  absl::Status finishShard(const std::string &split);

  /// The index being built; its `dir` is the build directory until
  /// finish().
  DatasetIndex index;
  DatasetWriterOptions options;
  /// The `dir` given to create(), and the directory the dataset is built
  /// in, beside it.
  std::string targetDir;
  std::unique_ptr<BuildDirectory> build;
  /// Each split's open shard (null between shards).
  std::map<std::string, std::unique_ptr<ShardWriter>> open;
  bool finished = false;
};

} // namespace sd::data

#endif // SD_DATA_DATASETWRITER_H
