//===- DatasetWriter.cpp - Writing sd datasets sample by sample -----------===//

#include "sd/Data/DatasetWriter.h"

#include "sd/Checkpoint/Safetensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>

namespace sd::data {

absl::Status checkHeldoutFraction(double fraction) {
  if (std::isfinite(fraction) && fraction >= 0 && fraction < 1)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "held-out fraction %g must be in [0, 1)", fraction));
}

namespace {

/// Whether `dir` has no entries.
absl::StatusOr<bool> isEmptyDirectory(const std::string &dir) {
  std::error_code error;
  llvm::sys::fs::directory_iterator it(dir, error);
  if (error)
    return absl::UnknownError(
        absl::StrCat("cannot list '", dir, "': ", error.message()));
  return it == llvm::sys::fs::directory_iterator();
}

/// Makes `dir` ready for a dataset named `name` (see DatasetWriter::create);
/// returns the shard files of the dataset it replaces.
absl::StatusOr<std::set<std::string>>
prepareDirectory(const std::string &dir, const std::string &name, bool force) {
  if (!llvm::sys::fs::exists(dir)) {
    if (std::error_code error = llvm::sys::fs::create_directories(dir))
      return absl::UnknownError(
          absl::StrCat("cannot create '", dir, "': ", error.message()));
    return std::set<std::string>();
  }
  if (!llvm::sys::fs::is_directory(dir))
    return absl::FailedPreconditionError(
        absl::StrCat("'", dir, "' exists and is not a directory"));
  absl::StatusOr<bool> empty = isEmptyDirectory(dir);
  if (!empty.ok())
    return empty.status();
  if (*empty)
    return std::set<std::string>();

  absl::StatusOr<DatasetIndex> old = readDatasetIndex(dir);
  std::set<std::string> oldShards;
  if (old.ok()) {
    if (old->name != name && !force)
      return absl::FailedPreconditionError(
          absl::StrCat("'", dir, "' holds dataset '", old->name,
                       "'; pass --force to replace it with '", name, "'"));
    for (const auto &[splitName, split] : old->splits)
      for (const ShardInfo &shard : split.shards)
        oldShards.insert(shard.file);
    // Without an index, an interrupted rebuild is not taken for a dataset.
    llvm::SmallString<256> indexPath(dir);
    llvm::sys::path::append(indexPath, kIndexFileName);
    if (std::error_code error = llvm::sys::fs::remove(indexPath))
      return absl::UnknownError(absl::StrCat(
          "cannot remove '", indexPath.str().str(), "': ", error.message()));
  } else if (!force) {
    if (absl::IsNotFound(old.status()))
      return absl::FailedPreconditionError(
          absl::StrCat("'", dir,
                       "' is not empty and holds no sd dataset; pass --force "
                       "to write into it"));
    return absl::FailedPreconditionError(
        absl::StrCat(old.status().message(), "; pass --force to replace it"));
  }
  return oldShards;
}

} // namespace

absl::StatusOr<DatasetWriter>
DatasetWriter::create(const std::string &dir, DatasetIndex header,
                      const DatasetWriterOptions &options) {
  if (options.shardSize < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "shard size %d must be positive", options.shardSize));
  for (auto &[name, split] : header.splits)
    split = SplitInfo();
  if (header.splits.empty())
    return absl::InvalidArgumentError("a dataset needs at least one split");
  // The header must make a valid index (checked by the index's own parser).
  llvm::SmallString<256> indexPath(dir);
  llvm::sys::path::append(indexPath, kIndexFileName);
  absl::StatusOr<DatasetIndex> checked = parseDatasetIndex(
      formatDatasetIndex(header), std::string(indexPath));
  if (!checked.ok())
    return checked.status();

  absl::StatusOr<std::set<std::string>> oldShards =
      prepareDirectory(dir, header.name, options.force);
  if (!oldShards.ok())
    return oldShards.status();
  header.dir = dir;
  DatasetWriter writer(std::move(header), options);
  writer.oldShards = std::move(*oldShards);
  for (const auto &[name, split] : writer.index.splits)
    writer.pending[name];
  return writer;
}

absl::Status DatasetWriter::add(const std::string &split,
                                absl::Span<const float> sample,
                                std::optional<int64_t> label,
                                absl::Span<const float> embedding) {
  if (finished)
    return absl::FailedPreconditionError("the dataset is finished already");
  auto it = pending.find(split);
  if (it == pending.end())
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", index.name, "' has no split '", split, "'"));
  if (static_cast<int64_t>(sample.size()) != index.sampleElements())
    return absl::InvalidArgumentError(absl::StrFormat(
        "a sample of %d values does not have the shape %s", sample.size(),
        formatShape(index.sampleShape)));
  int64_t numClasses = static_cast<int64_t>(index.classNames.size());
  if (label.has_value() != index.hasLabels)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", index.name, "' ",
                     index.hasLabels ? "needs a label for every sample"
                                     : "has no labels"));
  if (label && (*label < 0 || *label >= numClasses))
    return absl::InvalidArgumentError(absl::StrFormat(
        "label %d is not a class index in [0, %d)", *label, numClasses));
  if (static_cast<int64_t>(embedding.size()) != index.embeddingElements())
    return absl::InvalidArgumentError(absl::StrFormat(
        "an embedding of %d values does not have %d", embedding.size(),
        index.embeddingElements()));

  Pending &buffer = it->second;
  buffer.samples.insert(buffer.samples.end(), sample.begin(), sample.end());
  if (label)
    buffer.labels.push_back(static_cast<float>(*label));
  buffer.embeddings.insert(buffer.embeddings.end(), embedding.begin(),
                           embedding.end());
  if (++buffer.count == options.shardSize)
    return flush(split);
  return absl::OkStatus();
}

absl::Status DatasetWriter::flush(const std::string &split) {
  Pending &buffer = pending[split];
  SplitInfo &info = index.splits[split];
  ShardInfo shard;
  shard.file = absl::StrFormat("%s-%05d.safetensors", split,
                               info.shards.size());
  shard.count = buffer.count;

  std::vector<ckpt::SafetensorsTensorView> tensors;
  std::vector<int64_t> sampleShape = {buffer.count};
  sampleShape.insert(sampleShape.end(), index.sampleShape.begin(),
                     index.sampleShape.end());
  tensors.push_back({index.sampleFeature, sampleShape, buffer.samples.data()});
  if (index.hasLabels)
    tensors.push_back({"labels", {buffer.count}, buffer.labels.data()});
  if (index.embeddingShape) {
    std::vector<int64_t> embeddingShape = {buffer.count};
    embeddingShape.insert(embeddingShape.end(), index.embeddingShape->begin(),
                          index.embeddingShape->end());
    tensors.push_back({"embeddings", embeddingShape, buffer.embeddings.data()});
  }
  // The metadata says where the shard belongs, for a reader without the
  // index.
  std::map<std::string, std::string> metadata = {
      {"format", std::string(kDatasetFormat)},
      {"dataset", index.name},
      {"split", split},
      {"first_sample", absl::StrCat(info.count)}};
  absl::StatusOr<ckpt::WrittenFile> written =
      ckpt::writeSafetensors(index.shardPath(shard), tensors, metadata);
  if (!written.ok())
    return written.status();
  shard.sizeBytes = written->sizeBytes;
  shard.crc32 = written->crc32;
  info.count += shard.count;
  info.shards.push_back(std::move(shard));
  buffer = Pending();
  return absl::OkStatus();
}

absl::StatusOr<DatasetIndex> DatasetWriter::finish() {
  if (finished)
    return absl::FailedPreconditionError("the dataset is finished already");
  for (const auto &[split, buffer] : pending)
    if (buffer.count > 0)
      if (absl::Status status = flush(split); !status.ok())
        return status;
  if (absl::Status status = writeDatasetIndex(index, index.dir); !status.ok())
    return status;
  finished = true;
  // The replaced dataset's shards that the new index does not list.
  for (const auto &[name, split] : index.splits)
    for (const ShardInfo &shard : split.shards)
      oldShards.erase(shard.file);
  for (const std::string &file : oldShards) {
    ShardInfo old;
    old.file = file;
    if (std::error_code error = llvm::sys::fs::remove(index.shardPath(old)))
      return absl::UnknownError(absl::StrCat("cannot remove '",
                                             index.shardPath(old),
                                             "': ", error.message()));
  }
  return index;
}

} // namespace sd::data
