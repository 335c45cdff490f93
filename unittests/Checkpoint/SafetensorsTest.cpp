//===- SafetensorsTest.cpp - Tests for the safetensors reader/writer ------===//
//
// Files are compared byte for byte with the layout Python's `safetensors`
// writes (built here by hand), and damaged on purpose to check that every
// problem is reported with the file's and the tensor's name.
//
//===----------------------------------------------------------------------===//

#include "sd/Checkpoint/Safetensors.h"

#include "CheckpointTestUtils.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace sd::ckpt {
namespace {

using testutil::contains;
using testutil::makeTempDir;
using testutil::readAll;
using testutil::removeTempDir;
using testutil::writeAll;

/// CRC-32 (zlib's polynomial), bit by bit: an implementation independent of
/// the library's.
uint32_t referenceCrc32(const std::string &bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string littleEndian64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

/// A safetensors file as Python writes it: the compact JSON header padded
/// with spaces to a multiple of 8, its length, then the data.
std::string pythonLayout(std::string header, const std::string &data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return littleEndian64(header.size()) + header + data;
}

template <typename T> std::string rawBytes(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(T));
}

class SafetensorsTest : public testing::Test {
protected:
  void SetUp() override {
    dir = makeTempDir("sd-safetensors");
    ASSERT_FALSE(dir.empty());
  }
  void TearDown() override { removeTempDir(dir); }

  /// parseSafetensors's error for `bytes`, as file "f.safetensors".
  static absl::Status parseError(const std::string &bytes) {
    absl::StatusOr<SafetensorsFile> file =
        parseSafetensors(bytes, "f.safetensors");
    EXPECT_FALSE(file.ok());
    return file.status();
  }

  std::string dir;
};

TEST_F(SafetensorsTest, WriterProducesPythonsLayoutBitwise) {
  std::vector<float> a = {1.0f, -2.5f};
  std::vector<float> b = {0.0f, -0.0f, 3.25f};
  std::string path = dir + "/t.safetensors";
  absl::StatusOr<WrittenFile> written =
      writeSafetensors(path, {{"a", {2}, a.data()}, {"b", {1, 3}, b.data()}},
                       {{"format", "pt"}});
  ASSERT_TRUE(written.ok()) << written.status();

  // Compact JSON, "__metadata__" first, tensors in the order of their bytes,
  // padded with spaces so that the data starts 8-byte aligned.
  std::string expected = pythonLayout(
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[1,3],"data_offsets":[8,20]}})",
      rawBytes(a) + rawBytes(b));
  std::string actual = readAll(path);
  EXPECT_EQ(actual, expected);
  EXPECT_EQ((actual.size() - 20) % 8, 0u) << "data must start 8-aligned";
  EXPECT_EQ(written->sizeBytes, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(written->crc32, referenceCrc32(expected));
  // The .tmp file was renamed away.
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
}

TEST_F(SafetensorsTest, ReadsAHandWrittenFileOfEveryDtype) {
  // Python orders tensors by dtype alignment (largest first), then by name.
  std::vector<double> f64 = {0.1, -1e300};
  std::vector<float> f32 = {std::numeric_limits<float>::infinity(), 7.0f};
  // BF16: 1.5, -2, 2^-133 (a bf16 subnormal), NaN.
  std::vector<uint16_t> bf16 = {0x3fc0, 0xc000, 0x0001, 0x7fc0};
  // F16: 1, 65504 (largest), 2^-24 (smallest subnormal), -inf, -0, 0.333...
  std::vector<uint16_t> f16 = {0x3c00, 0x7bff, 0x0001, 0xfc00, 0x8000, 0x3555};
  std::string header =
      R"({"__metadata__":{"format":"pt","note":"x"},)"
      R"("d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
      R"("s":{"dtype":"F32","shape":[2,1],"data_offsets":[16,24]},)"
      R"("bf":{"dtype":"BF16","shape":[2,2],"data_offsets":[24,32]},)"
      R"("h":{"dtype":"F16","shape":[6],"data_offsets":[32,44]}})";
  std::string path = dir + "/python.safetensors";
  writeAll(path, pythonLayout(header, rawBytes(f64) + rawBytes(f32) +
                                          rawBytes(bf16) + rawBytes(f16)));

  absl::StatusOr<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{
                                {"format", "pt"}, {"note", "x"}}));
  ASSERT_EQ(file->tensors.size(), 4u);
  EXPECT_EQ(file->tensors[0].name, "d");
  EXPECT_EQ(file->tensors[3].name, "h");

  const SafetensorsTensor *d = file->find("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->dtype, "F64");
  EXPECT_EQ(d->values[0], 0.1f);
  EXPECT_EQ(d->values[1], -std::numeric_limits<float>::infinity());

  const SafetensorsTensor *s = file->find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s->values, f32);

  const SafetensorsTensor *bf = file->find("bf");
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->dtype, "BF16");
  EXPECT_EQ(bf->values[0], 1.5f);
  EXPECT_EQ(bf->values[1], -2.0f);
  EXPECT_EQ(bf->values[2], std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isnan(bf->values[3]));

  const SafetensorsTensor *h = file->find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->values[0], 1.0f);
  EXPECT_EQ(h->values[1], 65504.0f);
  EXPECT_EQ(h->values[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(h->values[3], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(h->values[4], 0.0f);
  EXPECT_TRUE(std::signbit(h->values[4]));
  EXPECT_EQ(h->values[5], 0.333251953125f);
  // Byte ranges are absolute in the file.
  EXPECT_EQ(h->fileEnd, static_cast<int64_t>(readAll(path).size()));
  EXPECT_EQ(h->fileEnd - h->fileBegin, 12);
}

TEST_F(SafetensorsTest, ReaderReadsBlocksOfItsRowsOnly) {
  // A [4, 3, 5] F32 tensor and a [4, 6] BF16 one, blocks of each read alone.
  std::vector<float> big(60);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i) - 0.5f;
  std::vector<uint16_t> bf16(24);
  for (size_t i = 0; i < bf16.size(); ++i)
    bf16[i] = static_cast<uint16_t>(0x3f80 + i); // 1 + i/128
  std::string header =
      R"({"big":{"dtype":"F32","shape":[4,3,5],"data_offsets":[0,240]},)"
      R"("bf":{"dtype":"BF16","shape":[4,6],"data_offsets":[240,288]}})";
  std::string path = dir + "/blocks.safetensors";
  writeAll(path, pythonLayout(header, rawBytes(big) + rawBytes(bf16)));
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader =
      SafetensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t headerBytes = (*reader)->bytesRead();
  const SafetensorsTensor *t = (*reader)->find("big");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->values.empty());
  // Rows 1..2 of dimension 0, columns 1..3 of dimension 2.
  std::vector<float> block(2 * 3 * 3);
  ASSERT_TRUE(
      (*reader)->readBlock(*t, {1, 0, 1}, {2, 3, 3}, block.data()).ok());
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 3; ++k)
        EXPECT_EQ(block[(i * 3 + j) * 3 + k],
                  big[(1 + i) * 15 + j * 5 + 1 + k]);
  // Only the bytes of the block's rows were read: 6 rows of 3 floats.
  EXPECT_EQ((*reader)->bytesRead() - headerBytes, 6 * 3 * 4);
  // A block of whole trailing dimensions is one run.
  std::vector<float> rows(2 * 15);
  ASSERT_TRUE((*reader)->readBlock(*t, {2, 0, 0}, {2, 3, 5}, rows.data()).ok());
  EXPECT_EQ(rows, std::vector<float>(big.begin() + 30, big.end()));
  // BF16 converts exactly.
  const SafetensorsTensor *bf = (*reader)->find("bf");
  ASSERT_NE(bf, nullptr);
  std::vector<float> half(4 * 2);
  ASSERT_TRUE((*reader)->readBlock(*bf, {0, 4}, {4, 2}, half.data()).ok());
  EXPECT_EQ(half[0], 1.0f + 4.0f / 128);
  EXPECT_EQ(half[7], 1.0f + 23.0f / 128);
  // Outside the tensor.
  absl::Status outside =
      (*reader)->readBlock(*t, {3, 0, 0}, {2, 3, 5}, rows.data());
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
}

TEST_F(SafetensorsTest, ReaderRefusesSpecialFilesAndHugeHeaders) {
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> zero =
      SafetensorsReader::open("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(contains(zero.status(), "not a regular file")) << zero.status();
  std::string path = dir + "/huge.safetensors";
  writeAll(path, littleEndian64(uint64_t(1) << 40) + std::string(64, ' '));
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> huge =
      SafetensorsReader::open(path);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(SafetensorsTest, StreamWriterWritesTensorByTensorAndLeavesNoTmp) {
  std::vector<float> a = {1.0f, -2.5f};
  std::vector<float> b = {0.0f, -0.0f, 3.25f};
  std::string path = dir + "/stream.safetensors";
  absl::StatusOr<WrittenFile> whole = writeSafetensors(
      dir + "/whole.safetensors",
      {{"a", {2}, a.data()}, {"b", {1, 3}, b.data()}}, {{"format", "pt"}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  {
    absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> writer =
        SafetensorsStreamWriter::create(path, {{"a", {2}}, {"b", {1, 3}}},
                                        {{"format", "pt"}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->append(a.data()).ok());
    // Unfinished: finish() names the missing tensor; nothing is in place.
    absl::StatusOr<WrittenFile> early = (*writer)->finish();
    EXPECT_FALSE(early.ok());
    EXPECT_TRUE(contains(early.status(), "missing tensor 'b'"));
    EXPECT_NE(access(path.c_str(), F_OK), 0);
    ASSERT_TRUE((*writer)->append(b.data()).ok());
    absl::StatusOr<WrittenFile> done = (*writer)->finish();
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->crc32, whole->crc32);
  }
  EXPECT_EQ(readAll(path), readAll(dir + "/whole.safetensors"));
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
  // Abandoned: the file that was there stays as it was.
  {
    absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> writer =
        SafetensorsStreamWriter::create(path, {{"c", {1}}}, {});
    ASSERT_TRUE(writer.ok()) << writer.status();
  }
  EXPECT_EQ(readAll(path), readAll(dir + "/whole.safetensors"));
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
}

TEST_F(SafetensorsTest, StreamWriterStoresBF16RoundedToNearestEven) {
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (1); 1 + 3·2^-8 rounds
  // up to 1 + 2^-6; -0 and NaN keep their sign; 3 is exact.
  std::vector<float> a = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 3.0f,
                          -std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> b = {0.1f};
  std::string path = dir + "/bf16.safetensors";
  {
    absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> writer =
        SafetensorsStreamWriter::create(
            path, {{"a", {5}, /*bf16=*/true}, {"b", {1}}}, {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->append(a.data()).ok());
    ASSERT_TRUE((*writer)->append(b.data()).ok());
    ASSERT_TRUE((*writer)->finish().ok());
  }
  absl::StatusOr<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors[0].dtype, "BF16");
  EXPECT_EQ(file->tensors[0].fileEnd - file->tensors[0].fileBegin, 10);
  const std::vector<float> &v = file->tensors[0].values;
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::signbit(v[2]) && v[2] == 0.0f);
  EXPECT_EQ(v[3], 3.0f);
  EXPECT_TRUE(std::isnan(v[4]) && std::signbit(v[4]));
  // The next tensor stays F32, exactly.
  EXPECT_EQ(file->tensors[1].dtype, "F32");
  EXPECT_EQ(file->tensors[1].values, b);
}

/// A tensor name with characters JSON escapes, and a non-ASCII one.
const char *const kOddName = "q\"u\\o\nt\x01" "e\xc3\xa9";

TEST_F(SafetensorsTest, RoundTripOfScalarsEmptyTensorsAndEmptyFiles) {
  std::vector<float> scalar = {42.5f};
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(static_cast<float>(i)) * 1e-3f;
  values[5] = std::numeric_limits<float>::quiet_NaN();
  std::string path = dir + "/r.safetensors";
  absl::StatusOr<WrittenFile> written =
      writeSafetensors(path,
                       {{"scalar", {}, scalar.data()},
                        {"empty", {3, 0}, nullptr},
                        {"x.y/z", {2, 3, 4}, values.data()},
                        {kOddName, {1}, scalar.data()}},
                       {{"k\t", "v\"\x1f"}});
  ASSERT_TRUE(written.ok()) << written.status();
  absl::StatusOr<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  // Names and metadata that JSON must escape come back as they were,
  // escaped as serde_json escapes them.
  EXPECT_EQ(file->metadata,
            (std::map<std::string, std::string>{{"k\t", "v\"\x1f"}}));
  ASSERT_EQ(file->tensors.size(), 4u);
  EXPECT_EQ(file->tensors[3].name, kOddName);
  EXPECT_NE(readAll(path).find("\"q\\\"u\\\\o\\nt\\u0001e\xc3\xa9\":"),
            std::string::npos);
  EXPECT_EQ(file->tensors[0].shape, std::vector<int64_t>{});
  EXPECT_EQ(file->tensors[0].values, scalar);
  EXPECT_EQ(file->tensors[1].shape, (std::vector<int64_t>{3, 0}));
  EXPECT_TRUE(file->tensors[1].values.empty());
  ASSERT_EQ(file->tensors[2].values.size(), values.size());
  EXPECT_EQ(std::memcmp(file->tensors[2].values.data(), values.data(),
                        values.size() * sizeof(float)),
            0);

  // No tensors and no metadata: "{}" and six spaces, as Python writes it.
  std::string empty = dir + "/empty.safetensors";
  ASSERT_TRUE(writeSafetensors(empty, {}, {}).ok());
  EXPECT_EQ(readAll(empty), pythonLayout("{}", ""));
  absl::StatusOr<SafetensorsFile> emptyFile = readSafetensors(empty);
  ASSERT_TRUE(emptyFile.ok()) << emptyFile.status();
  EXPECT_TRUE(emptyFile->tensors.empty());
}

TEST_F(SafetensorsTest, WriterReplacesAStaleTmpAndRejectsBadTensors) {
  std::string path = dir + "/w.safetensors";
  writeAll(path + ".tmp", std::string(1000, 'x'));
  std::vector<float> a = {1, 2};
  ASSERT_TRUE(writeSafetensors(path, {{"a", {2}, a.data()}}, {}).ok());
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
  EXPECT_TRUE(readSafetensors(path).ok());

  absl::StatusOr<WrittenFile> twice =
      writeSafetensors(path, {{"a", {2}, a.data()}, {"a", {1}, a.data()}}, {});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(twice.status(), "two tensors named 'a'"))
      << twice.status();
  absl::StatusOr<WrittenFile> negative =
      writeSafetensors(path, {{"a", {-2}, a.data()}}, {});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<WrittenFile> reserved =
      writeSafetensors(path, {{"__metadata__", {2}, a.data()}}, {});
  EXPECT_EQ(reserved.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<WrittenFile> noDirectory =
      writeSafetensors(dir + "/missing/w.safetensors", {}, {});
  EXPECT_EQ(noDirectory.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(contains(noDirectory.status(), "missing/w.safetensors.tmp"))
      << noDirectory.status();
}

TEST_F(SafetensorsTest, HalfWrittenHookSeesHalfTheFile) {
  std::vector<float> values(1000, 1.0f);
  std::string path = dir + "/h.safetensors";
  int64_t sizeAtHook = -1;
  absl::StatusOr<WrittenFile> written =
      writeSafetensors(path, {{"v", {1000}, values.data()}}, {}, [&] {
        sizeAtHook = static_cast<int64_t>(readAll(path + ".tmp").size());
      });
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(sizeAtHook, written->sizeBytes / 2);
}

TEST_F(SafetensorsTest, TruncatedFilesAreDataLoss) {
  std::vector<float> a = {1, 2, 3, 4};
  std::string path = dir + "/t.safetensors";
  ASSERT_TRUE(writeSafetensors(path, {{"a", {4}, a.data()}}, {}).ok());
  std::string bytes = readAll(path);

  // In the data: the tensor no longer fits.
  writeAll(path, bytes.substr(0, bytes.size() - 4));
  absl::StatusOr<SafetensorsFile> file = readSafetensors(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(contains(file.status(), "'" + path + "'")) << file.status();
  EXPECT_TRUE(contains(file.status(), "tensor 'a'")) << file.status();

  // In the header.
  absl::Status header = parseError(bytes.substr(0, 20));
  EXPECT_EQ(header.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(contains(header, "'f.safetensors' is truncated")) << header;
  // In the length.
  absl::Status length = parseError(bytes.substr(0, 5));
  EXPECT_EQ(length.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(contains(length, "is truncated: 5 bytes")) << length;
  // Trailing bytes no tensor claims.
  absl::Status trailing = parseError(bytes + "xxxx");
  EXPECT_EQ(trailing.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(contains(trailing, "end at byte 16")) << trailing;

  EXPECT_EQ(readSafetensors(dir + "/none.safetensors").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SafetensorsTest, BadHeadersAreReportedWithTheTensor) {
  std::string data16(16, '\0');
  struct Case {
    std::string header;
    std::string data;
    absl::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases = {
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16])", data16,
       absl::StatusCode::kDataLoss, "malformed header"},
      {R"([1,2])", "", absl::StatusCode::kDataLoss, "not a JSON object"},
      {R"({"a":{"shape":[4],"data_offsets":[0,16]}})", data16,
       absl::StatusCode::kDataLoss, "tensor 'a': no dtype"},
      {R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", data16,
       absl::StatusCode::kDataLoss, "tensor 'a': shape"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", data16,
       absl::StatusCode::kDataLoss, "tensor 'a': data_offsets"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data16,
       absl::StatusCode::kDataLoss, "tensor 'a' of shape [3] and dtype F32"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})",
       data16, absl::StatusCode::kDataLoss, "tensor 'b' at [4, 16] overlaps"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data16,
       absl::StatusCode::kDataLoss, "gap of 8 bytes before tensor 'a'"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[16,8]}})", data16,
       absl::StatusCode::kDataLoss, "tensor 'a' has data_offsets [16, 8]"},
      {R"({"a":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})", data16,
       absl::StatusCode::kInvalidArgument, "tensor 'a' has dtype I32"},
      {R"({"a":{"dtype":"Q9","shape":[4],"data_offsets":[0,16]}})", data16,
       absl::StatusCode::kDataLoss, "unknown dtype 'Q9'"},
      {R"({"__metadata__":{"k":1}})", "", absl::StatusCode::kDataLoss,
       "__metadata__ 'k' is not a string"},
  };
  for (const Case &c : cases) {
    absl::Status status = parseError(pythonLayout(c.header, c.data));
    EXPECT_EQ(status.code(), c.code) << c.header << "\n" << status;
    EXPECT_TRUE(contains(status, c.message)) << c.header << "\n" << status;
    EXPECT_TRUE(contains(status, "'f.safetensors'")) << status;
  }
  // A header length beyond the file.
  absl::Status huge = parseError(littleEndian64(1ull << 40) + "{}      ");
  EXPECT_EQ(huge.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(contains(huge, "is truncated")) << huge;
}

// Deeply nested JSON overflowed the stack in llvm::json::parse; it is
// rejected by a pre-scan, with the place where the limit is passed.
TEST_F(SafetensorsTest, DeeplyNestedHeaderIsDataLoss) {
  std::string header = R"({"__metadata__":{"k":)" + std::string(100000, '[') +
                       std::string(100000, ']') + "}}";
  absl::Status status = parseError(pythonLayout(header, ""));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_TRUE(contains(status,
                       "'f.safetensors' has a malformed header: 'header' is "
                       "nested too deeply: more than 256 levels of brackets "
                       "at line 1, column 276"))
      << status;
  // Brackets inside strings do not count.
  std::string names =
      R"({"__metadata__":{"k":")" + std::string(1000, '[') + R"("}})";
  absl::StatusOr<SafetensorsFile> file =
      parseSafetensors(pythonLayout(names, ""), "f.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata.at("k"), std::string(1000, '['));
}

/// Interoperability with Python's own library, when it is installed.
TEST_F(SafetensorsTest, PythonSafetensorsReadsAndWritesOurFiles) {
  if (std::system("/usr/bin/python3 -c 'import numpy, safetensors.numpy' "
                  ">/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python's safetensors (with numpy) is not installed";
  std::vector<float> a = {1.5f, -2.0f, 3.0f, 0.25f, 8.0f, -0.5f};
  std::string ours = dir + "/ours.safetensors";
  std::string theirs = dir + "/theirs.safetensors";
  ASSERT_TRUE(
      writeSafetensors(ours, {{"a", {2, 3}, a.data()}}, {{"k", "v"}}).ok());
  std::string script =
      "import numpy as np\n"
      "from safetensors.numpy import load_file, save_file\n"
      "from safetensors import safe_open\n"
      "t = load_file('" +
      ours +
      "')\n"
      "assert t['a'].shape == (2, 3) and t['a'].dtype == np.float32\n"
      "assert t['a'].tolist() == [[1.5, -2.0, 3.0], [0.25, 8.0, -0.5]]\n"
      "with safe_open('" +
      ours +
      "', 'np') as f:\n"
      "    assert f.metadata() == {'k': 'v'}\n"
      "save_file({'b': np.arange(4, dtype=np.float16).reshape(2, 2),\n"
      "           'c': np.array([0.5], dtype=np.float64)}, '" +
      theirs + "')\n";
  std::string scriptPath = dir + "/interop.py";
  writeAll(scriptPath, script);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + scriptPath).c_str()), 0);
  absl::StatusOr<SafetensorsFile> file = readSafetensors(theirs);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_NE(file->find("b"), nullptr);
  EXPECT_EQ(file->find("b")->values, (std::vector<float>{0, 1, 2, 3}));
  ASSERT_NE(file->find("c"), nullptr);
  EXPECT_EQ(file->find("c")->values, (std::vector<float>{0.5f}));
}

} // namespace
} // namespace sd::ckpt
