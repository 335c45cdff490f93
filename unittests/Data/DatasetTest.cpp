//===- DatasetTest.cpp - Tests for the dataset index, writer and reader ---===//

#include "DataTestUtils.h"

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Data/Dataset.h"
#include "sd/Data/DatasetWriter.h"

#include "gmock/gmock.h"

#include <zlib.h>

#include <cmath>
#include <sys/stat.h>

using namespace sd::data;
using namespace sd::data::testing;
using ::testing::HasSubstr;

namespace {

/// A toy dataset's header: images [2, 3, 1], classes a b c, train and
/// heldout.
DatasetIndex toyHeader(const std::string &name = "toy") {
  DatasetIndex header;
  header.name = name;
  header.source = "the tests";
  header.sampleShape = {2, 3, 1};
  header.range = std::array<double, 2>{-1, 1};
  header.classNames = {"a", "b", "c"};
  header.splits["train"];
  header.splits["heldout"];
  return header;
}

/// Sample `i` of the toy dataset: 6 values that encode i.
std::vector<float> toySample(int64_t i) {
  std::vector<float> sample;
  for (int k = 0; k < 6; ++k)
    sample.push_back(static_cast<float>(i * 10 + k));
  return sample;
}

/// Writes the toy dataset: `train` training samples (label i % 3) and 2
/// held out, at most `shardSize` per shard.
DatasetIndex writeToy(const fs::path &dir, int64_t train, int64_t shardSize,
                      const std::string &name = "toy") {
  DatasetWriterOptions options;
  options.shardSize = shardSize;
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(dir.string(), toyHeader(name), options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int64_t i = 0; i < train; ++i)
    EXPECT_TRUE(writer->add("train", toySample(i), i % 3).ok());
  for (int64_t i = 0; i < 2; ++i)
    EXPECT_TRUE(writer->add("heldout", toySample(100 + i), 2).ok());
  absl::StatusOr<DatasetIndex> index = writer->finish();
  EXPECT_TRUE(index.ok()) << index.status();
  return *index;
}

/// Rewrites shard `shard` of `split` with `tensors` and updates the index's
/// size and CRC so that only the content differs from what it declares.
void replaceShard(DatasetIndex &index, const std::string &split, size_t shard,
                  const std::vector<sd::ckpt::SafetensorsTensorView> &tensors) {
  ShardInfo &info = index.splits[split].shards[shard];
  absl::StatusOr<sd::ckpt::WrittenFile> written =
      sd::ckpt::writeSafetensors(index.shardPath(info), tensors, {});
  ASSERT_TRUE(written.ok()) << written.status();
  info.sizeBytes = written->sizeBytes;
  info.crc32 = written->crc32;
}

//===----------------------------------------------------------------------===//
// The index
//===----------------------------------------------------------------------===//

TEST(DatasetIndexTest, RoundTrip) {
  fs::path dir = freshDir();
  DatasetIndex written = writeToy(dir, 7, 3);
  absl::StatusOr<DatasetIndex> read = readDatasetIndex(dir.string());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->dir, dir.string());
  EXPECT_EQ(read->name, "toy");
  EXPECT_EQ(read->source, "the tests");
  EXPECT_EQ(read->sampleFeature, "images");
  EXPECT_EQ(read->sampleShape, (std::vector<int64_t>{2, 3, 1}));
  ASSERT_TRUE(read->range.has_value());
  EXPECT_EQ((*read->range)[0], -1);
  EXPECT_TRUE(read->hasLabels);
  EXPECT_FALSE(read->embeddingShape.has_value());
  EXPECT_EQ(read->classNames, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(read->splits.size(), 2u);
  const SplitInfo &train = read->splits.at("train");
  EXPECT_EQ(train.count, 7);
  ASSERT_EQ(train.shards.size(), 3u);
  EXPECT_EQ(train.shards[0].file, "train-00000.safetensors");
  EXPECT_EQ(train.shards[2].file, "train-00002.safetensors");
  EXPECT_EQ(train.shards[2].count, 1);
  for (size_t i = 0; i < train.shards.size(); ++i) {
    EXPECT_EQ(train.shards[i].crc32, written.splits["train"].shards[i].crc32);
    EXPECT_EQ(train.shards[i].sizeBytes,
              static_cast<int64_t>(fs::file_size(dir / train.shards[i].file)));
  }
  // Formatting the parsed index gives the file back.
  EXPECT_EQ(formatDatasetIndex(*read), readFile(dir / "index.json"));
  EXPECT_TRUE(verifyDataset(*read).ok());
}

TEST(DatasetIndexTest, LatentsWithEmbeddingsAndNoLabels) {
  DatasetIndex header;
  header.name = "cached";
  header.source = "a VAE and a text encoder";
  header.sampleFeature = "latents";
  header.sampleShape = {4, 4, 4};
  header.hasLabels = false;
  header.embeddingShape = std::vector<int64_t>{3, 2};
  header.splits["train"];
  absl::StatusOr<DatasetIndex> parsed =
      parseDatasetIndex(formatDatasetIndex(header), "x.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->sampleFeature, "latents");
  EXPECT_FALSE(parsed->range.has_value());
  EXPECT_FALSE(parsed->hasLabels);
  EXPECT_TRUE(parsed->classNames.empty());
  EXPECT_EQ(parsed->embeddingShape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(parsed->embeddingElements(), 6);
  header.embeddingShape = std::vector<int64_t>{1 << 24, 1 << 24};
  EXPECT_EQ(parseDatasetIndex(formatDatasetIndex(header), "x.json")
                .status()
                .message(),
            "'x.json': features.embeddings.shape has more than 2^31 elements");
}

TEST(DatasetIndexTest, MissingIndex) {
  fs::path dir = freshDir();
  absl::StatusOr<DatasetIndex> index = readDatasetIndex(dir.string());
  EXPECT_TRUE(absl::IsNotFound(index.status()));
  EXPECT_THAT(index.status().message(), HasSubstr("holds no sd dataset"));
}

/// A bad index and the error it gives.
struct BadIndex {
  const char *what;
  std::string from, to;
  const char *message;
};

TEST(DatasetIndexTest, BadIndexesNameTheField) {
  std::string good = formatDatasetIndex(toyHeader());
  // The toy header with one shard in train.
  good = good.replace(good.find("\"count\": 0,\n      \"shards\": []", good.find("\"train\"")),
                      std::string("\"count\": 0,\n      \"shards\": []").size(),
                      "\"count\": 4,\n      \"shards\": [{\"file\": \"t.safetensors\", "
                      "\"count\": 4, \"size_bytes\": 100, \"crc32\": \"0x0000abcd\"}]");
  ASSERT_TRUE(parseDatasetIndex(good, "i.json").ok())
      << parseDatasetIndex(good, "i.json").status() << good;
  std::vector<BadIndex> cases = {
      {"format", "\"sd-dataset\"", "\"other\"",
       "'i.json': format is 'other', not 'sd-dataset'"},
      {"version", "\"version\": 1", "\"version\": 2",
       "'i.json': version 2 is not supported (sd reads version 1)"},
      {"name", "\"name\": \"toy\"", "\"name\": 3", "'i.json': name must be a string"},
      {"missing", "\"source\": \"the tests\",", "", "'i.json': source is missing"},
      {"classes", "\"num_classes\": 3", "\"num_classes\": 4",
       "'i.json': num_classes is 4 but class_names has 3 names"},
      {"count", "\"count\": 4,\n", "\"count\": 5,\n",
       "'i.json': splits.train.count is 5 but its shards hold 4 samples"},
      {"crc", "0x0000abcd", "abcd",
       "'i.json': splits.train.shards[0].crc32 'abcd' must be \"0x\" and 8 hex digits"},
      {"file", "t.safetensors", "../t.safetensors",
       "'i.json': splits.train.shards[0].file '../t.safetensors' must be a "
       "file name in the dataset's directory"},
      {"shard count", "\"count\": 4, \"size", "\"count\": 0, \"size",
       "'i.json': splits.train.shards[0].count must be an integer >= 1"},
      {"dtype", "\"dtype\": \"F32\"", "\"dtype\": \"F16\"",
       "'i.json': features.images.dtype is 'F16'; sd datasets hold F32"},
      {"shape", "\"shape\": [\n        2,", "\"shape\": [\n        0,",
       "'i.json': features.images.shape must be an array of 3 positive sizes"},
      {"range", "\"range\": [\n        -1,", "\"range\": [\n        3,",
       "'i.json': features.images.range must be [low, high] with low < high"},
      {"feature", "\"images\"", "\"pixels\"",
       "'i.json': features must have exactly one of 'images' and 'latents'"},
      {"elements", "\"shape\": [\n        2,\n        3,",
       "\"shape\": [\n        16777216,\n        16777216,",
       "'i.json': features.images.shape has more than 2^31 elements"},
      {"split name", "\"train\"", "\"tr ain\"",
       "'i.json': splits.tr ain is not a split name"},
      {"features object", "\"features\": {", "\"features\": 3, \"x\": {",
       "'i.json': features must be an object"},
      {"shards array", "\"shards\": []", "\"shards\": 3",
       "'i.json': splits.heldout.shards must be an array"},
      {"shard object", "\"shards\": []", "\"shards\": [3]",
       "'i.json': splits.heldout.shards[0] must be an object"},
      {"overflow", "[{\"file\": \"t.safetensors\", \"count\": 4",
       "[{\"file\": \"u.safetensors\", \"count\": 9000000000000000000, "
       "\"size_bytes\": 100, \"crc32\": \"0x00000000\"}, "
       "{\"file\": \"t.safetensors\", \"count\": 9000000000000000000",
       "'i.json': splits.train has too many samples"},
      {"no range", "],\n      \"range\": [\n        -1,\n        1\n      ]",
       "]", "'i.json': features.images.range is missing"},
      {"no classes",
       "\"num_classes\": 3,\n  \"class_names\": [\n    \"a\",\n    \"b\",\n"
       "    \"c\"\n  ]",
       "\"num_classes\": 0,\n  \"class_names\": []",
       "'i.json': num_classes must be positive when samples have labels"},
      {"no labels",
       ",\n    \"labels\": {\n      \"dtype\": \"F32\",\n      \"shape\": []\n    }",
       "", "'i.json': num_classes must be 0 when samples have no labels"},
      {"class name", "\"a\",", "1,",
       "'i.json': class_names must be an array of strings"},
      {"shared shard", "\"count\": 0,\n      \"shards\": []",
       "\"count\": 1,\n      \"shards\": [{\"file\": \"t.safetensors\", "
       "\"count\": 1, \"size_bytes\": 100, \"crc32\": \"0x00000000\"}]",
       "'i.json': splits.train lists 't.safetensors', which is listed "
       "already"},
  };
  for (const BadIndex &bad : cases) {
    std::string text = good;
    size_t at = text.find(bad.from);
    ASSERT_NE(at, std::string::npos) << bad.what;
    text.replace(at, bad.from.size(), bad.to);
    absl::StatusOr<DatasetIndex> index = parseDatasetIndex(text, "i.json");
    EXPECT_TRUE(absl::IsInvalidArgument(index.status())) << bad.what;
    EXPECT_THAT(index.status().message(), HasSubstr(bad.message)) << bad.what;
  }
  absl::StatusOr<DatasetIndex> notJson = parseDatasetIndex("{", "i.json");
  EXPECT_THAT(notJson.status().message(), HasSubstr("'i.json' is not valid JSON"));
  absl::StatusOr<DatasetIndex> notObject = parseDatasetIndex("[]", "i.json");
  EXPECT_THAT(notObject.status().message(),
              HasSubstr("'i.json' must hold a JSON object"));
  absl::StatusOr<DatasetIndex> deep =
      parseDatasetIndex(std::string(1000, '[') + std::string(1000, ']'), "i.json");
  EXPECT_THAT(deep.status().message(), HasSubstr("nested too deeply"));
}

//===----------------------------------------------------------------------===//
// Reading samples
//===----------------------------------------------------------------------===//

TEST(DatasetReaderTest, ShuffledIndicesAcrossShards) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 10, 3);
  ASSERT_EQ(index.splits["train"].shards.size(), 4u);
  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, "train");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->size(), 10);
  EXPECT_EQ(reader->sampleElements(), 6);
  EXPECT_EQ(reader->embeddingElements(), 0);

  // Any order, across shard boundaries, with a repeat.
  std::vector<int64_t> indices = {9, 0, 4, 3, 8, 2, 6, 5, 1, 7, 3};
  std::vector<float> samples(indices.size() * 6), labels(indices.size());
  ASSERT_TRUE(
      reader->readSamples(indices, samples.data(), labels.data(), nullptr).ok());
  for (size_t k = 0; k < indices.size(); ++k) {
    std::vector<float> expected = toySample(indices[k]);
    EXPECT_EQ(std::vector<float>(samples.begin() + k * 6,
                                 samples.begin() + (k + 1) * 6),
              expected)
        << "index " << indices[k];
    EXPECT_EQ(labels[k], static_cast<float>(indices[k] % 3));
  }
  // Labels alone.
  std::vector<float> justLabels(2);
  ASSERT_TRUE(
      reader->readSamples({5, 4}, nullptr, justLabels.data(), nullptr).ok());
  EXPECT_EQ(justLabels, (std::vector<float>{2, 1}));

  absl::StatusOr<DatasetReader> heldout = DatasetReader::open(index, "heldout");
  ASSERT_TRUE(heldout.ok());
  std::vector<float> sample(6);
  ASSERT_TRUE(heldout->readSamples({1}, sample.data(), nullptr, nullptr).ok());
  EXPECT_EQ(sample, toySample(101));
}

TEST(DatasetReaderTest, Errors) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 4, 3);
  absl::StatusOr<DatasetReader> missing = DatasetReader::open(index, "test");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().message(), "dataset 'toy' has no split 'test'");

  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, "train");
  ASSERT_TRUE(reader.ok());
  std::vector<float> samples(6);
  absl::Status outside = reader->readSamples({4}, samples.data(), nullptr, nullptr);
  EXPECT_TRUE(absl::IsOutOfRange(outside));
  EXPECT_EQ(outside.message(),
            "sample 4 is outside split 'train' of dataset 'toy' (4 samples)");
  EXPECT_TRUE(absl::IsOutOfRange(
      reader->readSamples({-1}, samples.data(), nullptr, nullptr)));
  absl::Status noEmbeddings =
      reader->readSamples({0}, nullptr, nullptr, samples.data());
  EXPECT_EQ(noEmbeddings.message(), "dataset 'toy' has no embeddings");
}

TEST(DatasetReaderTest, EmbeddingsWithoutLabels) {
  fs::path dir = freshDir();
  DatasetIndex header;
  header.name = "cached";
  header.source = "tests";
  header.sampleFeature = "latents";
  header.sampleShape = {1, 1, 2};
  header.hasLabels = false;
  header.embeddingShape = std::vector<int64_t>{2, 2};
  header.splits["train"];
  DatasetWriterOptions options;
  options.shardSize = 2;
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(dir.string(), header, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (int i = 0; i < 3; ++i) {
    std::vector<float> latent = {float(i), -float(i)};
    std::vector<float> embedding = {float(i), 1, 2, 3};
    ASSERT_TRUE(writer->add("train", latent, std::nullopt, embedding).ok());
  }
  // A label for a dataset without labels, and a missing embedding.
  EXPECT_EQ(writer->add("train", {0, 0}, 1, {0, 1, 2, 3}).message(),
            "dataset 'cached' has no labels");
  EXPECT_EQ(writer->add("train", {0, 0}, std::nullopt).message(),
            "an embedding of 0 values does not have 4");
  absl::StatusOr<DatasetIndex> index = writer->finish();
  ASSERT_TRUE(index.ok()) << index.status();
  absl::Status verified = verifyDataset(*index);
  EXPECT_TRUE(verified.ok()) << verified;

  absl::StatusOr<DatasetReader> reader = DatasetReader::open(*index, "train");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->embeddingElements(), 4);
  std::vector<float> latents(4), embeddings(8), labels(2);
  ASSERT_TRUE(reader->readSamples({2, 0}, latents.data(), nullptr,
                                  embeddings.data())
                  .ok());
  EXPECT_EQ(latents, (std::vector<float>{2, -2, 0, 0}));
  EXPECT_EQ(embeddings, (std::vector<float>{2, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(reader->readSamples({0}, nullptr, labels.data(), nullptr).message(),
            "dataset 'cached' has no labels");
}

//===----------------------------------------------------------------------===//
// Verification: one message naming the file
//===----------------------------------------------------------------------===//

TEST(VerifyDatasetTest, MissingShard) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 5, 3);
  std::string path = (dir / "train-00001.safetensors").string();
  fs::remove(path);
  absl::Status status = verifyDataset(index);
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_EQ(status.message(), "dataset shard '" + path + "' is missing");
  // The reader checks the same when it opens.
  EXPECT_EQ(DatasetReader::open(index, "train").status(), status);
}

TEST(VerifyDatasetTest, TruncatedShard) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 5, 3);
  std::string path = (dir / "train-00000.safetensors").string();
  int64_t size = static_cast<int64_t>(fs::file_size(path));
  fs::resize_file(path, size - 10);
  absl::Status status = verifyDataset(index, /*checksums=*/false);
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_EQ(status.message(),
            absl::StrCat("dataset shard '", path, "' is truncated: ", size - 10,
                         " bytes, index says ", size));
  EXPECT_EQ(DatasetReader::open(index, "train").status(), status);

  // A longer file is reported too.
  writeFile(path, readFile(dir / "train-00001.safetensors") + std::string(200, 'x'));
  EXPECT_THAT(verifyDataset(index).message(),
              HasSubstr("dataset shard '" + path + "' has "));
}

TEST(VerifyDatasetTest, CorruptShard) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 5, 3);
  std::string path = (dir / "train-00001.safetensors").string();
  std::string bytes = readFile(path);
  uint32_t expected = index.splits["train"].shards[1].crc32;
  bytes[bytes.size() - 3] ^= 0x10;
  writeFile(path, bytes);
  uint32_t actual = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef *>(bytes.data()), bytes.size()));
  absl::Status status = verifyDataset(index);
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_EQ(status.message(),
            absl::StrCat("dataset shard '", path, "' is corrupt: crc32 ",
                         formatCrc32(actual), " != index's ",
                         formatCrc32(expected)));
  // Without checksums the flipped bit goes unnoticed.
  EXPECT_TRUE(verifyDataset(index, /*checksums=*/false).ok());
}

TEST(VerifyDatasetTest, WrongShape) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 5, 3);
  std::vector<float> images(3 * 2 * 2 * 1), labels(3, 0);
  replaceShard(index, "train", 0,
               {{"images", {3, 2, 2, 1}, images.data()},
                {"labels", {3}, labels.data()}});
  std::string path = (dir / "train-00000.safetensors").string();
  absl::Status status = verifyDataset(index);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(),
            "tensor 'images' in dataset shard '" + path +
                "' has shape [3, 2, 2, 1], index says [3, 2, 3, 1]");
  EXPECT_EQ(DatasetReader::open(index, "train").status(), status);

  // A count that disagrees with the index is a shape error too.
  std::vector<float> more(4 * 6);
  replaceShard(index, "train", 0,
               {{"images", {4, 2, 3, 1}, more.data()},
                {"labels", {3}, labels.data()}});
  EXPECT_THAT(verifyDataset(index).message(),
              HasSubstr("has shape [4, 2, 3, 1], index says [3, 2, 3, 1]"));
}

TEST(VerifyDatasetTest, MissingTensorAndBadLabel) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 5, 3);
  std::string path = (dir / "train-00001.safetensors").string();
  std::vector<float> images(2 * 6);
  replaceShard(index, "train", 1, {{"images", {2, 2, 3, 1}, images.data()}});
  EXPECT_EQ(verifyDataset(index).message(),
            "dataset shard '" + path + "' has no tensor 'labels'");

  std::vector<float> labels = {1, 3};
  replaceShard(index, "train", 1,
               {{"images", {2, 2, 3, 1}, images.data()},
                {"labels", {2}, labels.data()}});
  absl::Status status = verifyDataset(index);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(), "dataset shard '" + path +
                                  "': sample 1 has label 3, not a class "
                                  "index in [0, 3)");
  // Without checksums labels are not read; the reader checks each it reads.
  EXPECT_TRUE(verifyDataset(index, /*checksums=*/false).ok());
  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, "train");
  ASSERT_TRUE(reader.ok());
  float label;
  EXPECT_TRUE(reader->readSamples({3}, nullptr, &label, nullptr).ok());
  EXPECT_EQ(reader->readSamples({4}, nullptr, &label, nullptr), status);
}

/// Writes `bytes` as shard 0 of `split` and updates its size and CRC.
void writeRawShard(DatasetIndex &index, const std::string &split,
                   const std::string &bytes) {
  ShardInfo &info = index.splits[split].shards[0];
  writeFile(index.shardPath(info), bytes);
  info.sizeBytes = static_cast<int64_t>(bytes.size());
  info.crc32 = static_cast<uint32_t>(crc32(
      0, reinterpret_cast<const Bytef *>(bytes.data()), bytes.size()));
}

/// A safetensors file with `header` (padded) and `dataBytes` zero bytes.
std::string rawSafetensors(const std::string &header, size_t dataBytes) {
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  return bytes + header + std::string(dataBytes, '\0');
}

TEST(VerifyDatasetTest, MalformedHeaders) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 3, 3);
  std::string path = (dir / "train-00000.safetensors").string();
  std::string prefix =
      "dataset shard '" + path + "' is not a safetensors file: ";
  const char *images = "\"images\":{\"dtype\":\"F32\",";
  struct Bad {
    std::string bytes;
    std::string message;
  };
  std::vector<Bad> cases = {
      {"abc", "shorter than its 8-byte header length"},
      {rawSafetensors("{\"images\":", 0), "[1:10, byte=10]: Unexpected EOF"},
      {rawSafetensors("[1, 2]", 0), "its header is not a JSON object"},
      {rawSafetensors("{\"images\":{\"dtype\":\"F32\"}}", 0),
       "tensor 'images' lacks a dtype, shape or data_offsets"},
      {rawSafetensors(std::string("{") + images +
                          "\"shape\":[-3],\"data_offsets\":[0,0]}}",
                      0),
       "tensor 'images' has a bad shape"},
      {rawSafetensors(std::string("{") + images +
                          "\"shape\":[1],\"data_offsets\":[0,8]}}",
                      4),
       "tensor 'images' has data_offsets outside the file"},
      {rawSafetensors(std::string("{") + images +
                          "\"shape\":[3],\"data_offsets\":[0,8]}}",
                      8),
       "tensor 'images' has data_offsets that do not fit its shape"},
  };
  for (const Bad &bad : cases) {
    writeRawShard(index, "train", bad.bytes);
    absl::Status status = verifyDataset(index);
    EXPECT_TRUE(absl::IsDataLoss(status)) << bad.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(prefix + bad.message));
  }

  // A directory where the shard should be.
  fs::remove(path);
  fs::create_directories(path);
  EXPECT_EQ(verifyDataset(index).message(),
            "dataset shard '" + path + "' is not a file");
}

TEST(VerifyDatasetTest, NotSafetensorsAndWrongDtype) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 3, 3);
  ShardInfo &info = index.splits["train"].shards[0];
  std::string path = index.shardPath(info);

  // A header length past the end of the file.
  std::string garbage(64, '\xff');
  writeFile(path, garbage);
  info.sizeBytes = 64;
  info.crc32 = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef *>(garbage.data()), 64));
  absl::Status status = verifyDataset(index);
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(),
              HasSubstr("dataset shard '" + path +
                        "' is not a safetensors file: header length"));

  // An F16 tensor, written by hand.
  std::string header =
      "{\"images\":{\"dtype\":\"F16\",\"shape\":[3,2,3,1],"
      "\"data_offsets\":[0,36]}}";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  bytes += header + std::string(36, '\0');
  writeFile(path, bytes);
  info.sizeBytes = static_cast<int64_t>(bytes.size());
  info.crc32 = static_cast<uint32_t>(crc32(
      0, reinterpret_cast<const Bytef *>(bytes.data()), bytes.size()));
  EXPECT_EQ(verifyDataset(index).message(),
            "tensor 'images' in dataset shard '" + path +
                "' is F16; sd datasets hold F32");
}

//===----------------------------------------------------------------------===//
// The writer's directory rules and checks
//===----------------------------------------------------------------------===//

TEST(DatasetWriterTest, RebuildReplacesTheSameDatasetAndItsShards) {
  fs::path dir = freshDir();
  writeToy(dir, 10, 2);
  ASSERT_TRUE(fs::exists(dir / "train-00004.safetensors"));
  writeFile(dir / "notes.txt", "mine");
  // The same name: rebuilt in place; the shards it no longer has are gone,
  // other files stay.
  DatasetIndex index = writeToy(dir, 4, 100);
  EXPECT_EQ(index.splits["train"].shards.size(), 1u);
  EXPECT_FALSE(fs::exists(dir / "train-00001.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "train-00004.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  EXPECT_TRUE(verifyDataset(index).ok());
}

TEST(DatasetWriterTest, RefusesAnotherDatasetWithoutForce) {
  fs::path dir = freshDir();
  writeToy(dir, 3, 2);
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(dir.string(), toyHeader("other"), {});
  EXPECT_TRUE(absl::IsFailedPrecondition(writer.status()));
  EXPECT_EQ(writer.status().message(),
            "'" + dir.string() +
                "' holds dataset 'toy'; pass --force to replace it with "
                "'other'");
  EXPECT_TRUE(fs::exists(dir / "index.json"));

  DatasetWriterOptions force;
  force.force = true;
  force.shardSize = 10;
  absl::StatusOr<DatasetWriter> forced =
      DatasetWriter::create(dir.string(), toyHeader("other"), force);
  ASSERT_TRUE(forced.ok()) << forced.status();
  ASSERT_TRUE(forced->add("train", toySample(0), 0).ok());
  absl::StatusOr<DatasetIndex> index = forced->finish();
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(readDatasetIndex(dir.string())->name, "other");
  EXPECT_FALSE(fs::exists(dir / "train-00001.safetensors"));
}

TEST(DatasetWriterTest, RefusesOtherFilesWithoutForce) {
  fs::path dir = freshDir();
  writeFile(dir / "photo.png", "x");
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(dir.string(), toyHeader(), {});
  EXPECT_TRUE(absl::IsFailedPrecondition(writer.status()));
  EXPECT_EQ(writer.status().message(),
            "'" + dir.string() +
                "' is not empty and holds no sd dataset; pass --force to "
                "write into it");
  writeFile(dir / "index.json", "{");
  EXPECT_THAT(DatasetWriter::create(dir.string(), toyHeader(), {})
                  .status()
                  .message(),
              HasSubstr("is not valid JSON"));

  DatasetWriterOptions force;
  force.force = true;
  absl::StatusOr<DatasetWriter> forced =
      DatasetWriter::create(dir.string(), toyHeader(), force);
  ASSERT_TRUE(forced.ok()) << forced.status();
  ASSERT_TRUE(forced->finish().ok());
  EXPECT_TRUE(fs::exists(dir / "photo.png"));
  EXPECT_EQ(readDatasetIndex(dir.string())->splits.at("train").count, 0);

  // A file where the directory should be.
  EXPECT_THAT(DatasetWriter::create((dir / "photo.png").string(), toyHeader(),
                                    force)
                  .status()
                  .message(),
              HasSubstr("exists and is not a directory"));
}

TEST(DatasetWriterTest, BadHeadersAndSamples) {
  fs::path dir = freshDir();
  DatasetWriterOptions zero;
  zero.shardSize = 0;
  EXPECT_EQ(DatasetWriter::create(dir.string(), toyHeader(), zero)
                .status()
                .message(),
            "shard size 0 must be positive");
  DatasetIndex noSplits = toyHeader();
  noSplits.splits.clear();
  EXPECT_EQ(DatasetWriter::create(dir.string(), noSplits, {}).status().message(),
            "a dataset needs at least one split");
  EXPECT_THAT(DatasetWriter::create(dir.string(), toyHeader(""), {})
                  .status()
                  .message(),
              HasSubstr("name must not be empty"));
  // Nothing was created by the refused writers.
  EXPECT_TRUE(fs::is_empty(dir));

  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(dir.string(), toyHeader(), {});
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ(writer->add("test", toySample(0), 0).message(),
            "dataset 'toy' has no split 'test'");
  EXPECT_EQ(writer->add("train", {1, 2}, 0).message(),
            "a sample of 2 values does not have the shape [2, 3, 1]");
  EXPECT_EQ(writer->add("train", toySample(0), std::nullopt).message(),
            "dataset 'toy' needs a label for every sample");
  EXPECT_EQ(writer->add("train", toySample(0), 3).message(),
            "label 3 is not a class index in [0, 3)");
  ASSERT_TRUE(writer->finish().ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(writer->finish().status()));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(writer->add("train", toySample(0), 0)));
}

//===----------------------------------------------------------------------===//
// Hostile files, non-finite values and failed rebuilds
//===----------------------------------------------------------------------===//

// An index that is a FIFO (which blocked the reader for ever) or a sparse
// file of 8 GiB (which was read into memory) is refused at once.
TEST(DatasetIndexTest, SpecialAndHugeIndexFilesAreRefused) {
  fs::path dir = freshDir();
  fs::path index = dir / "index.json";
  ASSERT_EQ(::mkfifo(index.c_str(), 0600), 0);
  EXPECT_EQ(readDatasetIndex(dir.string()).status().message(),
            "cannot read dataset index \"" + index.string() +
                "\": not a regular file");
  fs::remove(index);
  writeFile(index, "");
  fs::resize_file(index, uint64_t(8) << 30);
  EXPECT_EQ(readDatasetIndex(dir.string()).status().message(),
            "cannot read dataset index \"" + index.string() +
                "\": 8589934592 bytes is above the limit of 67108864");
}

TEST(DatasetWriterTest, NonFiniteSamplesAreRefused) {
  fs::path dir = freshDir() / "toy";
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(dir.string(), toyHeader(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->add("train", toySample(0), 0).ok());
  std::vector<float> sample = toySample(1);
  sample[4] = std::nanf("");
  EXPECT_EQ(writer->add("train", sample, 1).message(),
            "sample 1 of split 'train' has nan in its images (value 4); sd "
            "trains on finite values only");
  sample[4] = -INFINITY;
  EXPECT_EQ(writer->add("heldout", sample, 1).message(),
            "sample 0 of split 'heldout' has -inf in its images (value 4); sd "
            "trains on finite values only");
}

// A NaN written by another tool: verifyDataset (what sdrun runs before
// training and `sddata inspect` runs) and the reader name the sample and
// its split.
TEST(VerifyDatasetTest, NonFiniteValuesNameTheSample) {
  fs::path dir = freshDir();
  DatasetIndex index = writeToy(dir, 5, 3);
  // train-00001 holds samples 3 and 4; sample 4's third value becomes inf.
  std::vector<float> images = toySample(3);
  std::vector<float> second = toySample(4);
  second[2] = INFINITY;
  images.insert(images.end(), second.begin(), second.end());
  std::vector<float> labels = {0, 1};
  replaceShard(index, "train", 1,
               {{"images", {2, 2, 3, 1}, images.data()},
                {"labels", {2}, labels.data()}});
  std::string path = (dir / "train-00001.safetensors").string();
  std::string message = "dataset shard '" + path +
                        "': sample 4 of split 'train' has inf in its "
                        "images; sd trains on finite values only";
  absl::Status status = verifyDataset(index);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(), message);
  // Without checksums the data is not read; the reader finds it when it is.
  EXPECT_TRUE(verifyDataset(index, /*checksums=*/false).ok());
  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, "train");
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> samples(12);
  EXPECT_TRUE(
      reader->readSamples({3, 0}, samples.data(), nullptr, nullptr).ok());
  EXPECT_EQ(
      reader->readSamples({0, 4}, samples.data(), nullptr, nullptr).message(),
      message);
}

/// The build directories (`.NAME.sddata-*`) left in `parent`.
std::vector<std::string> buildDirectories(const fs::path &parent) {
  std::vector<std::string> found;
  for (const fs::directory_entry &entry : fs::directory_iterator(parent))
    if (entry.path().filename().string().find(".sddata-") != std::string::npos)
      found.push_back(entry.path().string());
  return found;
}

// A rebuild that fails part-way (here: the writer is dropped without
// finish(), as a builder that meets a bad image does) leaves the old
// dataset exactly as it was, and nothing beside it.
TEST(DatasetWriterTest, FailedRebuildLeavesTheOldDataset) {
  fs::path parent = freshDir();
  fs::path dir = parent / "toy";
  DatasetIndex old = writeToy(dir, 5, 2);
  std::string oldIndex = readFile(dir / "index.json");
  std::string oldShard = readFile(dir / "train-00000.safetensors");
  {
    absl::StatusOr<DatasetWriter> writer =
        DatasetWriter::create(dir.string(), toyHeader(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int64_t i = 0; i < 3; ++i)
      ASSERT_TRUE(writer->add("train", toySample(50 + i), 0).ok());
    // Meanwhile the old dataset is whole.
    EXPECT_EQ(readFile(dir / "index.json"), oldIndex);
    EXPECT_EQ(buildDirectories(parent).size(), 1u);
  }
  EXPECT_EQ(readFile(dir / "index.json"), oldIndex);
  EXPECT_EQ(readFile(dir / "train-00000.safetensors"), oldShard);
  EXPECT_TRUE(verifyDataset(*readDatasetIndex(dir.string())).ok());
  EXPECT_TRUE(buildDirectories(parent).empty());

  // A new target under missing parents: nothing is left either.
  {
    absl::StatusOr<DatasetWriter> writer = DatasetWriter::create(
        (parent / "a" / "b" / "new").string(), toyHeader(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(writer->add("train", toySample(0), 0).ok());
  }
  EXPECT_FALSE(fs::exists(parent / "a"));
}

// Each sample goes to its shard file when it is added, so a shard need not
// fit in memory; the finished shard is a safetensors file like any other
// (its header padded with spaces to the room kept for it).
TEST(DatasetWriterTest, SamplesGoToTheShardFileAsTheyCome) {
  fs::path parent = freshDir();
  DatasetWriterOptions options;
  options.shardSize = 1000;
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create((parent / "toy").string(), toyHeader(), options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::string> builds = buildDirectories(parent);
  ASSERT_EQ(builds.size(), 1u);
  fs::path shard = fs::path(builds[0]) / "train-00000.safetensors";
  for (int64_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(writer->add("train", toySample(i), i % 3).ok());
    // The 8-byte length, the header's room, and i + 1 samples of 6 floats.
    EXPECT_GT(fs::file_size(shard), uint64_t(8 + 24 * (i + 1)));
  }
  absl::StatusOr<DatasetIndex> index = writer->finish();
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->dir, (parent / "toy").string());
  EXPECT_TRUE(buildDirectories(parent).empty());
  EXPECT_TRUE(verifyDataset(*index).ok());
  absl::StatusOr<sd::ckpt::SafetensorsFile> file = sd::ckpt::readSafetensors(
      (parent / "toy" / "train-00000.safetensors").string());
  ASSERT_TRUE(file.ok()) << file.status();
  const sd::ckpt::SafetensorsTensor *images = file->find("images");
  ASSERT_NE(images, nullptr);
  EXPECT_EQ(images->shape, (std::vector<int64_t>{10, 2, 3, 1}));
  EXPECT_EQ(
      std::vector<float>(images->values.begin() + 54, images->values.end()),
      toySample(9));
  const sd::ckpt::SafetensorsTensor *labels = file->find("labels");
  ASSERT_NE(labels, nullptr);
  EXPECT_EQ(labels->values, (std::vector<float>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(file->metadata.at("first_sample"), "0");
}

} // namespace
