//===- DatasetIndex.cpp - index.json of sd datasets -----------------------===//
//
// Writing (llvm::json's streaming writer, pretty-printed) and parsing (with
// a message per field) of a dataset's index.
//
//===----------------------------------------------------------------------===//

#include "sd/Data/Dataset.h"

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Support/Files.h"
#include "sd/Support/InputLimits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

namespace sd::data {

int64_t DatasetIndex::sampleElements() const {
  int64_t elements = 1;
  for (int64_t size : sampleShape)
    elements *= size;
  return elements;
}

int64_t DatasetIndex::embeddingElements() const {
  if (!embeddingShape)
    return 0;
  int64_t elements = 1;
  for (int64_t size : *embeddingShape)
    elements *= size;
  return elements;
}

int64_t DatasetIndex::pooledElements() const {
  return pooledShape ? pooledShape->front() : 0;
}

const SplitInfo *DatasetIndex::findSplit(std::string_view name) const {
  auto it = splits.find(std::string(name));
  return it == splits.end() ? nullptr : &it->second;
}

std::string DatasetIndex::shardPath(const ShardInfo &shard) const {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, shard.file);
  return std::string(path);
}

std::string formatCrc32(uint32_t crc) { return absl::StrFormat("0x%08x", crc); }

std::string formatShape(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

// GCC 12 under ASan reports llvm::json::Value's constructor (behind
// OStream's value() and attribute()) as reading an uninitialized union; the
// union is written before it is read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

void writeShape(llvm::json::OStream &json, llvm::StringRef key,
                const std::vector<int64_t> &shape) {
  json.attributeArray(key, [&] {
    for (int64_t size : shape)
      json.value(size);
  });
}

void writeFeature(llvm::json::OStream &json, llvm::StringRef name,
                  const std::vector<int64_t> &shape,
                  const std::optional<std::array<double, 2>> &range) {
  json.attributeObject(name, [&] {
    json.attribute("dtype", "F32");
    writeShape(json, "shape", shape);
    if (range)
      json.attributeArray("range", [&] {
        json.value((*range)[0]);
        json.value((*range)[1]);
      });
  });
}

} // namespace

std::string formatDatasetIndex(const DatasetIndex &index) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, /*IndentSize=*/2);
  // Keys in the order docs/data.md shows them.
  json.object([&] {
    json.attribute("format", kDatasetFormat);
    json.attribute("version", kDatasetVersion);
    json.attribute("name", index.name);
    json.attribute("source", index.source);
    json.attribute("num_classes",
                   static_cast<int64_t>(index.classNames.size()));
    json.attributeArray("class_names", [&] {
      for (const std::string &name : index.classNames)
        json.value(name);
    });
    json.attributeObject("features", [&] {
      writeFeature(json, index.sampleFeature, index.sampleShape, index.range);
      if (index.hasLabels)
        writeFeature(json, "labels", {}, std::nullopt);
      if (index.embeddingShape)
        writeFeature(json, "embeddings", *index.embeddingShape, std::nullopt);
      if (index.pooledShape)
        writeFeature(json, "pooled_embeddings", *index.pooledShape,
                     std::nullopt);
    });
    json.attributeObject("splits", [&] {
      for (const auto &[name, split] : index.splits)
        json.attributeObject(name, [&] {
          json.attribute("count", split.count);
          json.attributeArray("shards", [&] {
            for (const ShardInfo &shard : split.shards)
              json.object([&] {
                json.attribute("file", shard.file);
                json.attribute("count", shard.count);
                json.attribute("size_bytes", shard.sizeBytes);
                json.attribute("crc32", formatCrc32(shard.crc32));
              });
          });
        });
    });
  });
  os << "\n";
  return text;
}

#pragma GCC diagnostic pop

absl::Status writeDatasetIndex(const DatasetIndex &index,
                               const std::string &dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, kIndexFileName);
  return ckpt::writeFileAtomically(std::string(path),
                                   formatDatasetIndex(index));
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

/// Reads typed fields of the index, each error naming the file and the
/// field's path ("splits.train.shards[0].count").
class IndexParser {
public:
  explicit IndexParser(const std::string &fileName) : fileName(fileName) {}

  absl::Status error(const std::string &field,
                     const std::string &problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat("'", fileName, "': ", field, " ", problem));
  }

  absl::StatusOr<const llvm::json::Value *>
  get(const llvm::json::Object &object, llvm::StringRef key,
      const std::string &path) const {
    const llvm::json::Value *value = object.get(key);
    if (!value)
      return error(path, "is missing");
    return value;
  }

  absl::StatusOr<const llvm::json::Object *>
  object(const llvm::json::Object &parent, llvm::StringRef key,
         const std::string &path) const {
    absl::StatusOr<const llvm::json::Value *> value = get(parent, key, path);
    if (!value.ok())
      return value.status();
    if (const llvm::json::Object *result = (*value)->getAsObject())
      return result;
    return error(path, "must be an object");
  }

  absl::StatusOr<std::string> string(const llvm::json::Object &parent,
                                     llvm::StringRef key,
                                     const std::string &path) const {
    absl::StatusOr<const llvm::json::Value *> value = get(parent, key, path);
    if (!value.ok())
      return value.status();
    if (std::optional<llvm::StringRef> result = (*value)->getAsString())
      return result->str();
    return error(path, "must be a string");
  }

  absl::StatusOr<int64_t> integer(const llvm::json::Object &parent,
                                  llvm::StringRef key, const std::string &path,
                                  int64_t minimum) const {
    absl::StatusOr<const llvm::json::Value *> value = get(parent, key, path);
    if (!value.ok())
      return value.status();
    std::optional<int64_t> result = (*value)->getAsInteger();
    if (!result || *result < minimum)
      return error(path, absl::StrCat("must be an integer >= ", minimum));
    return *result;
  }

  /// A shape of `rank` dimensions, or of `rank` to `maxRank` when that is
  /// larger.
  absl::StatusOr<std::vector<int64_t>> shape(const llvm::json::Object &parent,
                                             const std::string &path,
                                             size_t rank,
                                             size_t maxRank = 0) const {
    std::string field = path + ".shape";
    absl::StatusOr<const llvm::json::Value *> value =
        get(parent, "shape", field);
    if (!value.ok())
      return value.status();
    std::vector<int64_t> result;
    const llvm::json::Array *array = (*value)->getAsArray();
    if (array)
      for (const llvm::json::Value &element : *array) {
        std::optional<int64_t> size = element.getAsInteger();
        if (!size || *size <= 0 || *size > (int64_t(1) << 24)) {
          array = nullptr;
          break;
        }
        result.push_back(*size);
      }
    maxRank = std::max(rank, maxRank);
    if (!array || result.size() < rank || result.size() > maxRank)
      return error(
          field,
          absl::StrFormat("must be an array of %s positive "
                          "sizes (at most 2^24 each)",
                          maxRank == rank
                              ? std::to_string(rank)
                              : absl::StrFormat("%d or %d", rank, maxRank)));
    return result;
  }

  /// A feature's object: dtype F32 and a shape of `rank` (to `maxRank`).
  absl::StatusOr<std::vector<int64_t>>
  feature(const llvm::json::Object &features, llvm::StringRef name, size_t rank,
          size_t maxRank = 0) const {
    std::string path = absl::StrCat("features.", name.str());
    absl::StatusOr<const llvm::json::Object *> object =
        this->object(features, name, path);
    if (!object.ok())
      return object.status();
    absl::StatusOr<std::string> dtype = string(**object, "dtype",
                                               path + ".dtype");
    if (!dtype.ok())
      return dtype.status();
    if (*dtype != "F32")
      return error(path + ".dtype",
                   absl::StrCat("is '", *dtype, "'; sd datasets hold F32"));
    return shape(**object, path, rank, maxRank);
  }

  absl::StatusOr<std::optional<std::array<double, 2>>>
  range(const llvm::json::Object &features, llvm::StringRef name) const {
    std::string path = absl::StrCat("features.", name.str(), ".range");
    const llvm::json::Value *value =
        features.getObject(name)->get("range");
    if (!value)
      return std::nullopt;
    const llvm::json::Array *array = value->getAsArray();
    std::optional<double> low, high;
    if (array && array->size() == 2) {
      low = (*array)[0].getAsNumber();
      high = (*array)[1].getAsNumber();
    }
    if (!low || !high || !std::isfinite(*low) || !std::isfinite(*high) ||
        !(*low < *high))
      return error(path, "must be [low, high] with low < high");
    return std::array<double, 2>{*low, *high};
  }

  absl::StatusOr<SplitInfo> split(const llvm::json::Object &splits,
                                  llvm::StringRef name) const;

  absl::StatusOr<DatasetIndex> index(const llvm::json::Object &root) const;

private:
  const std::string &fileName;
};

/// Whether `name` may be part of a file name: letters, digits, '_', '-'.
bool isPlainName(llvm::StringRef name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!llvm::isAlnum(c) && c != '_' && c != '-')
      return false;
  return true;
}

absl::StatusOr<SplitInfo> IndexParser::split(const llvm::json::Object &splits,
                                             llvm::StringRef name) const {
  std::string path = absl::StrCat("splits.", name.str());
  if (!isPlainName(name))
    return error(path, "is not a split name (letters, digits, '_' and '-')");
  absl::StatusOr<const llvm::json::Object *> object =
      this->object(splits, name, path);
  if (!object.ok())
    return object.status();
  SplitInfo split;
  absl::StatusOr<int64_t> count = integer(**object, "count", path + ".count", 0);
  if (!count.ok())
    return count.status();
  split.count = *count;
  const llvm::json::Array *shards = (*object)->getArray("shards");
  if (!shards)
    return error(path + ".shards", "must be an array");
  int64_t total = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    std::string shardPath = absl::StrFormat("%s.shards[%d]", path, i);
    const llvm::json::Object *entry = (*shards)[i].getAsObject();
    if (!entry)
      return error(shardPath, "must be an object");
    ShardInfo shard;
    absl::StatusOr<std::string> file =
        string(*entry, "file", shardPath + ".file");
    if (!file.ok())
      return file.status();
    // A plain name inside the directory, never a path out of it.
    if (file->empty() || file->find('/') != std::string::npos ||
        *file == "." || *file == "..")
      return error(shardPath + ".file",
                   absl::StrCat("'", *file,
                                "' must be a file name in the dataset's "
                                "directory"));
    shard.file = *file;
    absl::StatusOr<int64_t> shardCount =
        integer(*entry, "count", shardPath + ".count", 1);
    if (!shardCount.ok())
      return shardCount.status();
    shard.count = *shardCount;
    absl::StatusOr<int64_t> size =
        integer(*entry, "size_bytes", shardPath + ".size_bytes", 8);
    if (!size.ok())
      return size.status();
    shard.sizeBytes = *size;
    absl::StatusOr<std::string> crc =
        string(*entry, "crc32", shardPath + ".crc32");
    if (!crc.ok())
      return crc.status();
    unsigned long long crcValue = 0;
    if (crc->size() != 10 || !llvm::StringRef(*crc).starts_with("0x") ||
        llvm::StringRef(*crc).drop_front(2).getAsInteger(16, crcValue))
      return error(shardPath + ".crc32",
                   absl::StrCat("'", *crc, "' must be \"0x\" and 8 hex digits"));
    shard.crc32 = static_cast<uint32_t>(crcValue);
    if (__builtin_add_overflow(total, shard.count, &total))
      return error(path, "has too many samples");
    split.shards.push_back(std::move(shard));
  }
  if (total != split.count)
    return error(path + ".count",
                 absl::StrFormat("is %d but its shards hold %d samples",
                                 split.count, total));
  return split;
}

absl::StatusOr<DatasetIndex>
IndexParser::index(const llvm::json::Object &root) const {
  DatasetIndex index;
  absl::StatusOr<std::string> format = string(root, "format", "format");
  if (!format.ok())
    return format.status();
  if (*format != kDatasetFormat)
    return error("format", absl::StrCat("is '", *format, "', not '",
                                        kDatasetFormat, "'"));
  absl::StatusOr<int64_t> version = integer(root, "version", "version", 0);
  if (!version.ok())
    return version.status();
  if (*version != kDatasetVersion)
    return error("version", absl::StrFormat("%d is not supported (sd reads "
                                            "version %d)",
                                            *version, kDatasetVersion));
  absl::StatusOr<std::string> name = string(root, "name", "name");
  if (!name.ok())
    return name.status();
  if (name->empty())
    return error("name", "must not be empty");
  index.name = *name;
  absl::StatusOr<std::string> source = string(root, "source", "source");
  if (!source.ok())
    return source.status();
  index.source = *source;

  // Features: exactly one of images and latents, labels and embeddings
  // optional.
  absl::StatusOr<const llvm::json::Object *> features =
      object(root, "features", "features");
  if (!features.ok())
    return features.status();
  bool images = (*features)->get("images"), latents = (*features)->get("latents");
  if (images == latents)
    return error("features", "must have exactly one of 'images' and 'latents'");
  index.sampleFeature = images ? "images" : "latents";
  // Images [H, W, C]; latents also video [F, H, W, C].
  absl::StatusOr<std::vector<int64_t>> sampleShape =
      feature(**features, index.sampleFeature, 3, latents ? 4 : 3);
  if (!sampleShape.ok())
    return sampleShape.status();
  index.sampleShape = *sampleShape;
  absl::StatusOr<std::optional<std::array<double, 2>>> range =
      this->range(**features, index.sampleFeature);
  if (!range.ok())
    return range.status();
  index.range = *range;
  if (images && !index.range)
    return error("features.images.range", "is missing");
  // A sample of more than 2^31 floats (8 GiB) is not a training sample.
  // Checked factor by factor: sizes are at most 2^24 each, so no partial
  // product below the limit overflows when multiplied by the next.
  constexpr int64_t kMaxElements = int64_t(1) << 31;
  auto tooLarge = [&](const std::vector<int64_t> &shape) {
    int64_t elements = 1;
    for (int64_t size : shape) {
      elements *= size;
      if (elements > kMaxElements)
        return true;
    }
    return false;
  };
  if (tooLarge(index.sampleShape))
    return error(absl::StrCat("features.", index.sampleFeature, ".shape"),
                 "has more than 2^31 elements");
  index.hasLabels = (*features)->get("labels") != nullptr;
  if (index.hasLabels) {
    absl::StatusOr<std::vector<int64_t>> labels =
        feature(**features, "labels", 0);
    if (!labels.ok())
      return labels.status();
  }
  if ((*features)->get("embeddings")) {
    absl::StatusOr<std::vector<int64_t>> embeddings =
        feature(**features, "embeddings", 2);
    if (!embeddings.ok())
      return embeddings.status();
    index.embeddingShape = *embeddings;
    if (tooLarge(*index.embeddingShape))
      return error("features.embeddings.shape", "has more than 2^31 elements");
  }
  if ((*features)->get("pooled_embeddings")) {
    absl::StatusOr<std::vector<int64_t>> pooled =
        feature(**features, "pooled_embeddings", 1);
    if (!pooled.ok())
      return pooled.status();
    index.pooledShape = *pooled;
  }

  // Classes: a name per class, as many as num_classes; none without labels.
  absl::StatusOr<int64_t> numClasses =
      integer(root, "num_classes", "num_classes", 0);
  if (!numClasses.ok())
    return numClasses.status();
  const llvm::json::Array *classNames = root.getArray("class_names");
  if (!classNames)
    return error("class_names", "must be an array of strings");
  for (const llvm::json::Value &className : *classNames) {
    std::optional<llvm::StringRef> text = className.getAsString();
    if (!text)
      return error("class_names", "must be an array of strings");
    index.classNames.push_back(text->str());
  }
  if (static_cast<int64_t>(index.classNames.size()) != *numClasses)
    return error("num_classes",
                 absl::StrFormat("is %d but class_names has %d names",
                                 *numClasses, index.classNames.size()));
  if (index.hasLabels && *numClasses == 0)
    return error("num_classes", "must be positive when samples have labels");
  if (!index.hasLabels && *numClasses != 0)
    return error("num_classes", "must be 0 when samples have no labels");

  absl::StatusOr<const llvm::json::Object *> splits =
      object(root, "splits", "splits");
  if (!splits.ok())
    return splits.status();
  // In name order, so that the first bad split reported does not depend on
  // the JSON object's hash order.
  std::vector<std::string> names;
  for (const auto &entry : **splits)
    names.push_back(entry.first.str());
  std::sort(names.begin(), names.end());
  for (const std::string &name : names) {
    absl::StatusOr<SplitInfo> split = this->split(**splits, name);
    if (!split.ok())
      return split.status();
    index.splits.emplace(name, std::move(*split));
  }
  // Two splits must not share a shard file.
  std::map<std::string, std::string> owners;
  for (const auto &[name, split] : index.splits)
    for (const ShardInfo &shard : split.shards)
      if (!owners.emplace(shard.file, name).second)
        return error(absl::StrCat("splits.", name),
                     absl::StrCat("lists '", shard.file,
                                  "', which is listed already"));
  return index;
}

} // namespace

absl::StatusOr<DatasetIndex> parseDatasetIndex(std::string_view json,
                                               const std::string &fileName) {
  if (absl::Status status = checkNestingDepth(json, fileName); !status.ok())
    return status;
  llvm::Expected<llvm::json::Value> value =
      llvm::json::parse(llvm::StringRef(json.data(), json.size()));
  if (!value)
    return absl::InvalidArgumentError(
        absl::StrCat("'", fileName, "' is not valid JSON: ",
                     llvm::toString(value.takeError())));
  const llvm::json::Object *root = value->getAsObject();
  if (!root)
    return absl::InvalidArgumentError(
        absl::StrCat("'", fileName, "' must hold a JSON object"));
  return IndexParser(fileName).index(*root);
}

absl::StatusOr<DatasetIndex> readDatasetIndex(const std::string &dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, kIndexFileName);
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> bytes =
      readRegularFile(path.str(), "dataset index", kMaxIndexFileBytes);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status()))
      return absl::NotFoundError(absl::StrCat(
          "'", dir, "' holds no sd dataset (no ", kIndexFileName, ")"));
    return bytes.status();
  }
  absl::StatusOr<DatasetIndex> index = parseDatasetIndex(
      std::string_view((*bytes)->getBuffer()), std::string(path));
  if (!index.ok())
    return index.status();
  index->dir = dir;
  return index;
}

} // namespace sd::data
