//===- DatasetWriter.h - Writing sd datasets sample by sample ---*- C++ -*-===//
//
// Builders (sddata's digits and image folders, or a user's own C++ code)
// add samples one at a time; the writer buffers at most one shard per split
// and writes it (safetensors, atomically) when it is full, so a dataset
// larger than memory can be written. index.json is written last, so a
// directory whose build was interrupted has no index and is not mistaken
// for a dataset.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_DATASETWRITER_H
#define SD_DATA_DATASETWRITER_H

#include "sd/Data/Dataset.h"

#include <set>

namespace sd::data {

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
  /// - a missing directory is created, an empty one is used;
  /// - one that holds a dataset of the same name is rebuilt: its index is
  ///   removed now and the shards the new index does not list at finish();
  /// - one that holds a dataset of another name, or other files, is refused
  ///   (FailedPrecondition) unless `options.force`; files that are not the
  ///   old dataset's shards are never removed.
  /// InvalidArgument for a bad header or shard size.
  static absl::StatusOr<DatasetWriter> create(const std::string &dir,
                                              DatasetIndex header,
                                              const DatasetWriterOptions &options);

  /// Appends one sample to `split`: `sample` has sampleElements() floats,
  /// `label` is a class index exactly when the dataset has labels, and
  /// `embedding` has embeddingElements() floats (empty without embeddings).
  /// Writes the split's shard when it is full.
  absl::Status add(const std::string &split, absl::Span<const float> sample,
                   std::optional<int64_t> label,
                   absl::Span<const float> embedding = {});

  /// The index's `source`, which a builder may complete before finish()
  /// with what it learned while writing.
  const std::string &source() const { return index.source; }
  void setSource(std::string source) { index.source = std::move(source); }

  /// Writes the remaining shards and then the index; returns the index
  /// (with `dir` set). The writer is done afterwards.
  absl::StatusOr<DatasetIndex> finish();

private:
  /// The samples of a split not yet in a shard.
  struct Pending {
    int64_t count = 0;
    std::vector<float> samples;
    std::vector<float> labels;
    std::vector<float> embeddings;
  };

  DatasetWriter(DatasetIndex index, const DatasetWriterOptions &options)
      : index(std::move(index)), options(options) {}
  /// Writes `split`'s pending samples as its next shard.
  absl::Status flush(const std::string &split);

  DatasetIndex index;
  DatasetWriterOptions options;
  std::map<std::string, Pending> pending;
  /// Shard files of the dataset being replaced, removed at finish() unless
  /// the new index lists them.
  std::set<std::string> oldShards;
  bool finished = false;
};

} // namespace sd::data

#endif // SD_DATA_DATASETWRITER_H
