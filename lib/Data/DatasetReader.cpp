//===- DatasetReader.cpp - Checking and reading dataset shards ------------===//
//
// verifyDataset and DatasetReader share one way of opening a shard: check
// its size against the index, map it (llvm::MemoryBuffer), optionally check
// its CRC-32, then read the safetensors header and find the split's tensors
// in the mapping. Only the header is parsed: the loader copies samples
// straight out of the mapped file, so a shard's data is never converted or
// copied as a whole (ckpt::parseSafetensors would convert every tensor).
//
//===----------------------------------------------------------------------===//

#include "sd/Data/Dataset.h"

#include "sd/Support/Files.h"
#include "sd/Support/InputLimits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sd::data {

// Tensor bytes are copied from the file to floats as they are.
static_assert(llvm::endianness::native == llvm::endianness::little,
              "safetensors data is little-endian");

namespace {

/// Where one tensor's bytes are in a shard.
struct TensorLayout {
  std::string dtype;
  std::vector<int64_t> shape;
  /// [begin, end) from the start of the file.
  int64_t begin = 0;
  int64_t end = 0;
};

/// A shard's file mapped into memory, with its tensors' data (null when the
/// dataset has no such feature).
struct MappedShard {
  std::string path;
  int64_t count = 0;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  const char *samples = nullptr;
  const char *labels = nullptr;
  const char *embeddings = nullptr;
  const char *pooled = nullptr;
};

absl::Status notSafetensors(const std::string &path, const std::string &why) {
  return absl::DataLossError(absl::StrCat(
      "dataset shard '", path, "' is not a safetensors file: ", why));
}

/// The tensors listed in the safetensors header of `bytes`, with their byte
/// ranges checked to lie inside the file and to match their shapes (F32).
absl::StatusOr<std::map<std::string, TensorLayout>>
parseShardHeader(llvm::StringRef bytes, const std::string &path) {
  if (bytes.size() < 8)
    return notSafetensors(path, "shorter than its 8-byte header length");
  uint64_t headerLength = llvm::support::endian::read64le(bytes.data());
  if (headerLength > bytes.size() - 8)
    return notSafetensors(path, absl::StrFormat(
                                    "header length %d runs past its end",
                                    headerLength));
  llvm::StringRef header = bytes.substr(8, headerLength);
  int64_t dataBegin = 8 + static_cast<int64_t>(headerLength);
  int64_t dataSize = static_cast<int64_t>(bytes.size()) - dataBegin;
  if (absl::Status status = checkNestingDepth(
          std::string_view(header.data(), header.size()), path);
      !status.ok())
    return status;
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(header);
  if (!json)
    return notSafetensors(path, llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    return notSafetensors(path, "its header is not a JSON object");
  // Entries in name order, so that the first bad one reported does not
  // depend on the JSON object's hash order.
  std::vector<llvm::StringRef> keys;
  for (const auto &entry : *object)
    if (entry.first != "__metadata__")
      keys.push_back(entry.first);
  llvm::sort(keys);
  std::map<std::string, TensorLayout> tensors;
  for (llvm::StringRef key : keys) {
    const llvm::json::Object *entry = object->getObject(key);
    const llvm::json::Array *shape = entry ? entry->getArray("shape") : nullptr;
    const llvm::json::Array *offsets =
        entry ? entry->getArray("data_offsets") : nullptr;
    std::optional<llvm::StringRef> dtype =
        entry ? entry->getString("dtype") : std::nullopt;
    if (!dtype || !shape || !offsets || offsets->size() != 2)
      return notSafetensors(
          path, absl::StrCat("tensor '", key.str(),
                             "' lacks a dtype, shape or data_offsets"));
    TensorLayout layout;
    layout.dtype = dtype->str();
    int64_t elements = 1;
    for (const llvm::json::Value &size : *shape) {
      std::optional<int64_t> value = size.getAsInteger();
      if (!value || *value < 0 ||
          __builtin_mul_overflow(elements, *value, &elements))
        return notSafetensors(
            path, absl::StrCat("tensor '", key.str(), "' has a bad shape"));
      layout.shape.push_back(*value);
    }
    std::optional<int64_t> begin = (*offsets)[0].getAsInteger();
    std::optional<int64_t> end = (*offsets)[1].getAsInteger();
    if (!begin || !end || *begin < 0 || *end < *begin || *end > dataSize)
      return notSafetensors(path,
                            absl::StrCat("tensor '", key.str(),
                                         "' has data_offsets outside the "
                                         "file"));
    if (layout.dtype == "F32" &&
        (elements > (*end - *begin) / 4 || *end - *begin != elements * 4))
      return notSafetensors(path,
                            absl::StrCat("tensor '", key.str(),
                                         "' has data_offsets that do not fit "
                                         "its shape"));
    layout.begin = dataBegin + *begin;
    layout.end = dataBegin + *end;
    tensors.emplace(key.str(), std::move(layout));
  }
  return tensors;
}

/// Finds tensor `name` of `shape` (F32) in the shard's header.
absl::StatusOr<const char *>
findTensor(const std::map<std::string, TensorLayout> &tensors,
           const MappedShard &shard, const std::string &name,
           const std::vector<int64_t> &shape) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset shard '", shard.path, "' has no tensor '", name, "'"));
  const TensorLayout &layout = it->second;
  if (layout.dtype != "F32")
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' in dataset shard '", shard.path,
                     "' is ", layout.dtype, "; sd datasets hold F32"));
  if (layout.shape != shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' in dataset shard '", shard.path, "' has shape ",
        formatShape(layout.shape), ", index says ", formatShape(shape)));
  return shard.buffer->getBufferStart() + layout.begin;
}

/// Checks that `label` is a class index.
absl::Status checkLabel(float label, int64_t numClasses,
                        const MappedShard &shard, int64_t sample) {
  if (label >= 0 && label < static_cast<float>(numClasses) &&
      label == std::floor(label))
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "dataset shard '%s': sample %d has label %g, not a class index in "
      "[0, %d)",
      shard.path, sample, label, numClasses));
}

/// Checks that the `count` floats at `values` (sample `sample` of `split`'s
/// `feature`) are finite: a NaN or an infinity in the data trains to a NaN
/// loss.
absl::Status checkFinite(const char *values, int64_t count,
                         const MappedShard &shard, const std::string &split,
                         int64_t sample, const std::string &feature) {
  for (int64_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, values + i * sizeof(float), sizeof(value));
    if (!std::isfinite(value))
      return absl::InvalidArgumentError(absl::StrFormat(
          "dataset shard '%s': sample %d of split '%s' has %g in its %s; sd "
          "trains on finite values only",
          shard.path, sample, split, value, feature));
  }
  return absl::OkStatus();
}

/// Opens `shard` of `index` the way verifyDataset and DatasetReader::open
/// check it (see verifyDataset).
absl::StatusOr<MappedShard> openShard(const DatasetIndex &index,
                                      const ShardInfo &info, bool checksums) {
  MappedShard shard;
  shard.path = index.shardPath(info);
  shard.count = info.count;
  llvm::sys::fs::file_status status;
  if (std::error_code error = llvm::sys::fs::status(shard.path, status)) {
    if (error == std::errc::no_such_file_or_directory)
      return absl::NotFoundError(
          absl::StrCat("dataset shard '", shard.path, "' is missing"));
    return absl::UnknownError(absl::StrCat(
        "cannot read dataset shard '", shard.path, "': ", error.message()));
  }
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset shard '", shard.path, "' is not a file"));
  if (static_cast<int64_t>(status.getSize()) > info.sizeBytes)
    return absl::DataLossError(
        absl::StrFormat("dataset shard '%s' has %d bytes, index says %d",
                        shard.path, status.getSize(), info.sizeBytes));
  // Mapped first and measured after, so that the checks below see the
  // bytes that are read.
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = readRegularFile(
      shard.path, "dataset shard", static_cast<uint64_t>(info.sizeBytes));
  if (!buffer.ok())
    return buffer.status();
  shard.buffer = std::move(*buffer);
  llvm::StringRef bytes = shard.buffer->getBuffer();
  int64_t size = static_cast<int64_t>(bytes.size());
  if (size < info.sizeBytes)
    return absl::DataLossError(
        absl::StrFormat("dataset shard '%s' is truncated: %d bytes, index "
                        "says %d",
                        shard.path, size, info.sizeBytes));
  if (size > info.sizeBytes)
    return absl::DataLossError(
        absl::StrFormat("dataset shard '%s' has %d bytes, index says %d",
                        shard.path, size, info.sizeBytes));
  if (checksums) {
    uint32_t crc = llvm::crc32(llvm::arrayRefFromStringRef(bytes));
    if (crc != info.crc32)
      return absl::DataLossError(absl::StrCat(
          "dataset shard '", shard.path, "' is corrupt: crc32 ",
          formatCrc32(crc), " != index's ", formatCrc32(info.crc32)));
  }

  absl::StatusOr<std::map<std::string, TensorLayout>> tensors =
      parseShardHeader(bytes, shard.path);
  if (!tensors.ok())
    return tensors.status();
  std::vector<int64_t> sampleShape = {info.count};
  sampleShape.insert(sampleShape.end(), index.sampleShape.begin(),
                     index.sampleShape.end());
  absl::StatusOr<const char *> samples =
      findTensor(*tensors, shard, index.sampleFeature, sampleShape);
  if (!samples.ok())
    return samples.status();
  shard.samples = *samples;
  if (index.hasLabels) {
    absl::StatusOr<const char *> labels =
        findTensor(*tensors, shard, "labels", {info.count});
    if (!labels.ok())
      return labels.status();
    shard.labels = *labels;
  }
  if (index.embeddingShape) {
    std::vector<int64_t> embeddingShape = {info.count};
    embeddingShape.insert(embeddingShape.end(), index.embeddingShape->begin(),
                          index.embeddingShape->end());
    absl::StatusOr<const char *> embeddings =
        findTensor(*tensors, shard, "embeddings", embeddingShape);
    if (!embeddings.ok())
      return embeddings.status();
    shard.embeddings = *embeddings;
  }
  if (index.pooledShape) {
    absl::StatusOr<const char *> pooled =
        findTensor(*tensors, shard, "pooled_embeddings",
                   {info.count, index.pooledElements()});
    if (!pooled.ok())
      return pooled.status();
    shard.pooled = *pooled;
  }
  return shard;
}

} // namespace

absl::Status verifyDataset(const DatasetIndex &index, bool checksums) {
  int64_t numClasses = static_cast<int64_t>(index.classNames.size());
  int64_t sampleElements = index.sampleElements();
  int64_t embeddingElements = index.embeddingElements();
  int64_t pooledElements = index.pooledElements();
  for (const auto &[name, split] : index.splits) {
    // The split's index of the shard's first sample.
    int64_t start = 0;
    for (const ShardInfo &info : split.shards) {
      absl::StatusOr<MappedShard> shard = openShard(index, info, checksums);
      if (!shard.ok())
        return shard.status();
      // Values and labels are data, so only a full read checks them.
      for (int64_t i = 0; checksums && i < info.count; ++i) {
        if (absl::Status status = checkFinite(
                shard->samples + i * sampleElements * sizeof(float),
                sampleElements, *shard, name, start + i, index.sampleFeature);
            !status.ok())
          return status;
        if (shard->embeddings)
          if (absl::Status status = checkFinite(
                  shard->embeddings + i * embeddingElements * sizeof(float),
                  embeddingElements, *shard, name, start + i, "embeddings");
              !status.ok())
            return status;
        if (shard->pooled)
          if (absl::Status status = checkFinite(
                  shard->pooled + i * pooledElements * sizeof(float),
                  pooledElements, *shard, name, start + i, "pooled_embeddings");
              !status.ok())
            return status;
        if (!shard->labels)
          continue;
        float label;
        std::memcpy(&label, shard->labels + i * sizeof(float), sizeof(label));
        if (absl::Status status = checkLabel(label, numClasses, *shard, i);
            !status.ok())
          return status;
      }
      start += info.count;
    }
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// DatasetReader
//===----------------------------------------------------------------------===//

struct DatasetReader::Impl {
  std::string datasetName;
  std::string split;
  std::string sampleFeature;
  int64_t sampleElements = 0;
  int64_t embeddingElements = 0;
  int64_t pooledElements = 0;
  bool hasLabels = false;
  bool hasEmbeddings = false;
  bool hasPooled = false;
  int64_t numClasses = 0;
  std::vector<MappedShard> shards;
  /// The split's index of each shard's first sample, and the split's size
  /// last.
  std::vector<int64_t> starts;
};

DatasetReader::DatasetReader(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
DatasetReader::DatasetReader(DatasetReader &&) noexcept = default;
DatasetReader &DatasetReader::operator=(DatasetReader &&) noexcept = default;
DatasetReader::~DatasetReader() = default;

absl::StatusOr<DatasetReader> DatasetReader::open(const DatasetIndex &index,
                                                  const std::string &split) {
  const SplitInfo *info = index.findSplit(split);
  if (!info)
    return absl::NotFoundError(absl::StrCat("dataset '", index.name,
                                            "' has no split '", split, "'"));
  auto impl = std::make_unique<Impl>();
  impl->datasetName = index.name;
  impl->split = split;
  impl->sampleFeature = index.sampleFeature;
  impl->sampleElements = index.sampleElements();
  impl->embeddingElements = index.embeddingElements();
  impl->hasLabels = index.hasLabels;
  impl->hasEmbeddings = index.embeddingShape.has_value();
  impl->pooledElements = index.pooledElements();
  impl->hasPooled = index.pooledShape.has_value();
  impl->numClasses = static_cast<int64_t>(index.classNames.size());
  int64_t start = 0;
  for (const ShardInfo &shardInfo : info->shards) {
    absl::StatusOr<MappedShard> shard =
        openShard(index, shardInfo, /*checksums=*/false);
    if (!shard.ok())
      return shard.status();
    impl->shards.push_back(std::move(*shard));
    impl->starts.push_back(start);
    start += shardInfo.count;
  }
  impl->starts.push_back(start);
  return DatasetReader(std::move(impl));
}

int64_t DatasetReader::size() const { return impl->starts.back(); }
int64_t DatasetReader::sampleElements() const { return impl->sampleElements; }
int64_t DatasetReader::embeddingElements() const {
  return impl->embeddingElements;
}
int64_t DatasetReader::pooledElements() const { return impl->pooledElements; }

absl::Status DatasetReader::readSamples(absl::Span<const int64_t> indices,
                                        float *samples, float *labels,
                                        float *embeddings,
                                        float *pooled) const {
  if (labels && !impl->hasLabels)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", impl->datasetName, "' has no labels"));
  if (embeddings && !impl->hasEmbeddings)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", impl->datasetName, "' has no embeddings"));
  if (pooled && !impl->hasPooled)
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", impl->datasetName, "' has no pooled embeddings"));
  size_t pooledBytes = static_cast<size_t>(impl->pooledElements) * 4;
  size_t sampleBytes = static_cast<size_t>(impl->sampleElements) * 4;
  size_t embeddingBytes = static_cast<size_t>(impl->embeddingElements) * 4;
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t index = indices[k];
    if (index < 0 || index >= size())
      return absl::OutOfRangeError(absl::StrFormat(
          "sample %d is outside split '%s' of dataset '%s' (%d samples)",
          index, impl->split, impl->datasetName, size()));
    // The last shard whose first sample is at or before `index`.
    size_t shardIndex = static_cast<size_t>(
        std::upper_bound(impl->starts.begin(), impl->starts.end(), index) -
        impl->starts.begin() - 1);
    const MappedShard &shard = impl->shards[shardIndex];
    int64_t local = index - impl->starts[shardIndex];
    if (samples) {
      const char *sample = shard.samples + local * sampleBytes;
      if (absl::Status status =
              checkFinite(sample, impl->sampleElements, shard, impl->split,
                          index, impl->sampleFeature);
          !status.ok())
        return status;
      std::memcpy(samples + k * impl->sampleElements, sample, sampleBytes);
    }
    if (labels) {
      std::memcpy(&labels[k], shard.labels + local * sizeof(float),
                  sizeof(float));
      if (absl::Status status =
              checkLabel(labels[k], impl->numClasses, shard, local);
          !status.ok())
        return status;
    }
    if (embeddings) {
      const char *embedding = shard.embeddings + local * embeddingBytes;
      if (absl::Status status =
              checkFinite(embedding, impl->embeddingElements, shard,
                          impl->split, index, "embeddings");
          !status.ok())
        return status;
      std::memcpy(embeddings + k * impl->embeddingElements, embedding,
                  embeddingBytes);
    }
    if (pooled) {
      const char *vector = shard.pooled + local * pooledBytes;
      if (absl::Status status =
              checkFinite(vector, impl->pooledElements, shard, impl->split,
                          index, "pooled_embeddings");
          !status.ok())
        return status;
      std::memcpy(pooled + k * impl->pooledElements, vector, pooledBytes);
    }
  }
  return absl::OkStatus();
}

} // namespace sd::data
