//===- BuildersTest.cpp - Tests for the digits and image-folder builders --===//

#include "DataTestUtils.h"

#include "sd/Data/Builders.h"
#include "sd/Data/Inspect.h"

#include "gmock/gmock.h"
#include "llvm/Support/raw_ostream.h"

#include <zlib.h>

#include <set>
#include <sys/stat.h>

using namespace sd::data;
using namespace sd::data::testing;
using ::testing::HasSubstr;

namespace {

/// A digits CSV of `rows` rows, row r with label r % 10 and pixel i equal to
/// (r + i) % 17.
std::string digitsCsv(int rows) {
  std::string text;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < 64; ++i)
      text += std::to_string((r + i) % 17) + ",";
    text += std::to_string(r % 10) + "\n";
  }
  return text;
}

void writeGzip(const fs::path &path, const std::string &text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

/// Every sample of `split` with its label.
std::pair<std::vector<float>, std::vector<float>>
readAll(const DatasetIndex &index, const std::string &split) {
  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, split);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<int64_t> all(static_cast<size_t>(reader->size()));
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<int64_t>(i);
  std::vector<float> samples(all.size() * reader->sampleElements()),
      labels(all.size());
  EXPECT_TRUE(
      reader->readSamples(all, samples.data(), labels.data(), nullptr).ok());
  return {samples, labels};
}

//===----------------------------------------------------------------------===//
// Digits
//===----------------------------------------------------------------------===//

TEST(DigitsTest, BuildsSplitsFromAGzippedCsv) {
  fs::path dir = freshDir();
  writeGzip(dir / "digits.csv.gz", digitsCsv(40));
  DigitsOptions options;
  options.csvPath = (dir / "digits.csv.gz").string();
  options.heldout = 0.25;
  options.writer.shardSize = 7;
  absl::StatusOr<DatasetIndex> index =
      buildDigitsDataset((dir / "out").string(), options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->name, "digits");
  EXPECT_EQ(index->sampleShape, (std::vector<int64_t>{8, 8, 1}));
  EXPECT_EQ(index->classNames.size(), 10u);
  EXPECT_EQ(index->classNames[3], "3");
  EXPECT_EQ(index->splits["train"].count, 30);
  EXPECT_EQ(index->splits["heldout"].count, 10);
  EXPECT_EQ(index->splits["train"].shards.size(), 5u);
  EXPECT_THAT(index->source, HasSubstr("40 images of 8x8"));
  EXPECT_TRUE(verifyDataset(*index).ok());

  // Each class keeps one held-out sample, and pixels v become v/16*2-1:
  // a row's pixels count up from its first one, modulo 17.
  auto [samples, labels] = readAll(*index, "heldout");
  std::vector<int> perClass(10, 0);
  for (size_t s = 0; s < labels.size(); ++s) {
    ++perClass[static_cast<int>(labels[s])];
    int first = static_cast<int>(std::lround((samples[s * 64] + 1) / 2 * 16));
    for (int i = 0; i < 64; ++i)
      EXPECT_FLOAT_EQ(samples[s * 64 + i],
                      float((first + i) % 17) / 16 * 2 - 1);
  }
  EXPECT_EQ(perClass, std::vector<int>(10, 1));
}

TEST(DigitsTest, SixteenPixelsAndPlainCsv) {
  fs::path dir = freshDir();
  writeFile(dir / "digits.csv", digitsCsv(10));
  DigitsOptions options;
  options.csvPath = (dir / "digits.csv").string();
  options.resolution = 16;
  options.heldout = 0;
  absl::StatusOr<DatasetIndex> index =
      buildDigitsDataset((dir / "out").string(), options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->sampleShape, (std::vector<int64_t>{16, 16, 1}));
  EXPECT_EQ(index->splits["heldout"].count, 0);
  EXPECT_TRUE(index->splits["heldout"].shards.empty());
  auto [samples, labels] = readAll(*index, "train");
  ASSERT_EQ(samples.size(), 10u * 256);
  for (float value : samples) {
    EXPECT_GE(value, -1.0f);
    EXPECT_LE(value, 1.0f);
  }
}

TEST(DigitsTest, SameSeedSameDataset) {
  fs::path dir = freshDir();
  writeFile(dir / "d.csv", digitsCsv(30));
  DigitsOptions options;
  options.csvPath = (dir / "d.csv").string();
  absl::StatusOr<DatasetIndex> a = buildDigitsDataset((dir / "a").string(), options);
  absl::StatusOr<DatasetIndex> b = buildDigitsDataset((dir / "b").string(), options);
  options.seed = 1;
  absl::StatusOr<DatasetIndex> c = buildDigitsDataset((dir / "c").string(), options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->splits["train"].shards[0].crc32, b->splits["train"].shards[0].crc32);
  EXPECT_NE(a->splits["train"].shards[0].crc32, c->splits["train"].shards[0].crc32);
}

TEST(DigitsTest, RealDigits) {
  if (!fs::exists(kDefaultDigitsCsv))
    GTEST_SKIP() << "python3-sklearn is not installed";
  fs::path dir = freshDir();
  absl::StatusOr<DatasetIndex> index =
      buildDigitsDataset(dir.string(), DigitsOptions());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->splits["train"].count, 1617);
  EXPECT_EQ(index->splits["heldout"].count, 180);
  absl::StatusOr<std::map<std::string, std::vector<int64_t>>> counts =
      countClasses(*index);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at("heldout"), std::vector<int64_t>(10, 18));
}

TEST(DigitsTest, BadInputs) {
  fs::path dir = freshDir();
  std::string out = (dir / "out").string();
  DigitsOptions options;
  options.csvPath = (dir / "d.csv").string();
  options.resolution = 12;
  EXPECT_EQ(buildDigitsDataset(out, options).status().message(),
            "digits resolution 12 is not supported; use 8 or 16");
  options.resolution = 8;
  options.heldout = 1;
  EXPECT_EQ(buildDigitsDataset(out, options).status().message(),
            "held-out fraction 1 must be in [0, 1)");
  options.heldout = 0.1;
  absl::StatusOr<DatasetIndex> missing = buildDigitsDataset(out, options);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().message(),
            "digits file '" + options.csvPath +
                "' does not exist (install python3-sklearn, or pass "
                "--digits-csv)");

  struct Bad {
    std::string text;
    std::string message;
  };
  std::string row = digitsCsv(1);
  std::vector<Bad> cases = {
      {row + "1,2,3\n", "line 2: expected 65 comma-separated values (64 "
                        "pixels and the label), found 3"},
      {"17" + row.substr(1), "line 1: pixel 0 '17' is not an integer in 0..16"},
      {row.substr(0, row.size() - 2) + "x\n",
       "line 1: label 'x' is not a digit 0..9"},
      {"\n\n", "' holds no digits"},
  };
  for (const Bad &bad : cases) {
    writeFile(options.csvPath, bad.text);
    absl::StatusOr<DatasetIndex> index = buildDigitsDataset(out, options);
    EXPECT_TRUE(absl::IsInvalidArgument(index.status())) << bad.message;
    EXPECT_THAT(index.status().message(),
                HasSubstr("digits file '" + options.csvPath))
        << bad.message;
    EXPECT_THAT(index.status().message(), HasSubstr(bad.message));
  }
  // A gzip stream cut in half.
  writeGzip(dir / "d.csv.gz", digitsCsv(50));
  std::string gz = readFile(dir / "d.csv.gz");
  writeFile(dir / "d.csv.gz", gz.substr(0, gz.size() / 2));
  options.csvPath = (dir / "d.csv.gz").string();
  absl::StatusOr<DatasetIndex> cut = buildDigitsDataset(out, options);
  EXPECT_TRUE(absl::IsDataLoss(cut.status()));
  EXPECT_THAT(cut.status().message(),
              HasSubstr("digits file '" + options.csvPath +
                        "' is not a valid gzip file"));
  EXPECT_FALSE(fs::exists(out));
}

// The digits file may be a FIFO or /dev/zero (refused by its type), or a
// small gzip file that inflates without end (refused past the limit).
TEST(DigitsTest, SpecialFilesAndGzipBombs) {
  fs::path dir = freshDir();
  std::string out = (dir / "out").string();
  DigitsOptions options;
  options.csvPath = (dir / "fifo.csv").string();
  ASSERT_EQ(::mkfifo(options.csvPath.c_str(), 0600), 0);
  EXPECT_EQ(buildDigitsDataset(out, options).status().message(),
            "cannot read digits file \"" + options.csvPath +
                "\": not a regular file");
  options.csvPath = "/dev/zero";
  EXPECT_EQ(buildDigitsDataset(out, options).status().message(),
            "cannot read digits file \"/dev/zero\": not a regular file");
  // 65 MiB of text in 65 KiB of gzip.
  options.csvPath = (dir / "bomb.csv.gz").string();
  writeGzip(options.csvPath, std::string(kMaxDigitsFileBytes + (1 << 20), '0'));
  EXPECT_LT(fs::file_size(options.csvPath), uint64_t(1) << 20);
  EXPECT_EQ(buildDigitsDataset(out, options).status().message(),
            "digits file '" + options.csvPath +
                "' inflates to more than 67108864 bytes");
  EXPECT_FALSE(fs::exists(out));
}

//===----------------------------------------------------------------------===//
// Image folders
//===----------------------------------------------------------------------===//

/// src/cat: 3 images (PNG, JPEG, a nested PNG), src/dog: 2 PNGs; plus files
/// that are ignored.
fs::path makeImageTree(const fs::path &dir) {
  fs::path src = dir / "pets";
  writeFile(src / "cat" / "a.png", solidPng(6, 4, 255, 255, 255));
  std::vector<uint8_t> gray(8 * 8, 0);
  writeFile(src / "cat" / "b.JPG", encodeJpeg(8, 8, 1, gray));
  writeFile(src / "cat" / "more" / "c.png", solidPng(3, 3, 255, 0, 0));
  writeFile(src / "dog" / "d.png", solidPng(2, 2, 0, 0, 255));
  writeFile(src / "dog" / "e.png", solidPng(5, 5, 0, 255, 0));
  writeFile(src / "dog" / "notes.txt", "not an image");
  writeFile(src / ".hidden" / "x.png", "not even a PNG");
  writeFile(src / "dog" / ".y.png", "hidden");
  return src;
}

TEST(ImageFolderTest, ClassesFromSubdirectories) {
  fs::path dir = freshDir();
  fs::path src = makeImageTree(dir);
  ImageFolderOptions options;
  options.resolution = 4;
  options.heldout = 0.2;
  absl::StatusOr<DatasetIndex> index = buildImageFolderDataset(
      src.string(), (dir / "out").string(), options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->name, "pets");
  EXPECT_EQ(index->classNames, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(index->sampleShape, (std::vector<int64_t>{4, 4, 3}));
  // round(0.2 × 5) = 1 held out, from the larger class.
  EXPECT_EQ(index->splits["train"].count, 4);
  EXPECT_EQ(index->splits["heldout"].count, 1);
  EXPECT_THAT(index->source, HasSubstr("5 images from"));
  EXPECT_TRUE(verifyDataset(*index).ok());
  absl::StatusOr<std::map<std::string, std::vector<int64_t>>> counts =
      countClasses(*index);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at("train"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(counts->at("heldout"), (std::vector<int64_t>{1, 0}));

  // Flat colors stay flat through crop and resize; [0, 255] → [-1, 1].
  auto [train, trainLabels] = readAll(*index, "train");
  auto [heldout, heldoutLabels] = readAll(*index, "heldout");
  train.insert(train.end(), heldout.begin(), heldout.end());
  std::multiset<std::vector<float>> colors;
  for (size_t s = 0; s < train.size() / 48; ++s) {
    std::vector<float> first(train.begin() + s * 48, train.begin() + s * 48 + 3);
    for (int p = 0; p < 16; ++p)
      for (int c = 0; c < 3; ++c)
        EXPECT_NEAR(train[s * 48 + p * 3 + c], first[c], 0.02);
    for (float &value : first)
      value = std::round(value);
    colors.insert(first);
  }
  std::multiset<std::vector<float>> expected = {
      {1, 1, 1}, {-1, -1, -1}, {1, -1, -1}, {-1, -1, 1}, {-1, 1, -1}};
  EXPECT_EQ(colors, expected);
}

TEST(ImageFolderTest, FlatDirectoryIsOneUnnamedClassInGray) {
  fs::path dir = freshDir();
  fs::path src = dir / "flat";
  writeFile(src / "1.png", solidPng(4, 4, 255, 255, 255));
  writeFile(src / "2.png", solidPng(4, 4, 0, 0, 0));
  ImageFolderOptions options;
  options.resolution = 2;
  options.channels = 1;
  options.heldout = 0;
  options.name = "mine";
  absl::StatusOr<DatasetIndex> index = buildImageFolderDataset(
      src.string(), (dir / "out").string(), options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->name, "mine");
  EXPECT_EQ(index->classNames, std::vector<std::string>{""});
  EXPECT_EQ(index->sampleShape, (std::vector<int64_t>{2, 2, 1}));
  auto [samples, labels] = readAll(*index, "train");
  std::multiset<float> firsts = {std::round(samples[0]), std::round(samples[4])};
  EXPECT_EQ(firsts, (std::multiset<float>{-1, 1}));
  EXPECT_EQ(labels, (std::vector<float>{0, 0}));
}

TEST(ImageFolderTest, CorruptImagesFailOrAreSkipped) {
  fs::path dir = freshDir();
  fs::path src = makeImageTree(dir);
  std::string bad = (src / "dog" / "e.png").string();
  std::string png = readFile(bad);
  writeFile(bad, png.substr(0, png.size() - 20));
  ImageFolderOptions options;
  options.resolution = 4;
  absl::StatusOr<DatasetIndex> failed = buildImageFolderDataset(
      src.string(), (dir / "out").string(), options);
  EXPECT_TRUE(absl::IsInvalidArgument(failed.status()));
  EXPECT_THAT(failed.status().message(),
              HasSubstr("'" + bad + "' is not a valid PNG image"));
  // The interrupted build left no index.
  EXPECT_FALSE(fs::exists(dir / "out" / "index.json"));

  std::vector<std::string> warnings;
  options.skipBad = true;
  options.warn = [&](const std::string &message) {
    warnings.push_back(message);
  };
  options.writer.force = true;
  absl::StatusOr<DatasetIndex> index = buildImageFolderDataset(
      src.string(), (dir / "out").string(), options);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("'" + bad + "' is not a valid PNG image"));
  EXPECT_THAT(warnings[0], HasSubstr("; skipped"));
  EXPECT_EQ(index->splits["train"].count + index->splits["heldout"].count, 4);
  EXPECT_THAT(index->source, HasSubstr("; 1 unreadable images skipped"));
  EXPECT_EQ(readDatasetIndex((dir / "out").string())->source, index->source);
}

TEST(ImageFolderTest, BadTreesAndOptions) {
  fs::path dir = freshDir();
  std::string out = (dir / "out").string();
  ImageFolderOptions options;
  options.resolution = 4;
  fs::path src = makeImageTree(dir);

  auto message = [&](const fs::path &source) {
    return std::string(
        buildImageFolderDataset(source.string(), out, options).status().message());
  };
  EXPECT_EQ(message(dir / "none"),
            "image directory '" + (dir / "none").string() + "' does not exist");
  options.resolution = 0;
  EXPECT_EQ(message(src), "resolution 0 must be in [1, 4096]");
  options.resolution = 4;
  options.channels = 2;
  EXPECT_EQ(message(src), "2 channels are not supported; use 1 or 3");
  options.channels = 3;
  options.heldout = -0.5;
  EXPECT_EQ(message(src), "held-out fraction -0.5 must be in [0, 1)");
  options.heldout = 0.1;

  writeFile(src / "stray.png", solidPng(2, 2, 0, 0, 0));
  EXPECT_EQ(message(src), "'" + src.string() +
                              "' has both class subdirectories and images ('" +
                              (src / "stray.png").string() +
                              "'); put every image in its class's subdirectory");
  fs::remove(src / "stray.png");
  fs::create_directories(src / "empty");
  EXPECT_EQ(message(src), "class directory '" + (src / "empty").string() +
                              "' holds no PNG or JPEG images");
  fs::create_directories(dir / "blank");
  writeFile(dir / "blank" / "readme.txt", "no images");
  EXPECT_EQ(message(dir / "blank"),
            "'" + (dir / "blank").string() + "' holds no PNG or JPEG images");

  fs::remove_all(src / "empty");
  EXPECT_EQ(std::string(buildImageFolderDataset(src.string(),
                                                (src / "cat" / "out").string(),
                                                options)
                            .status()
                            .message()),
            "output directory '" + (src / "cat" / "out").string() +
                "' is inside the image directory '" + src.string() + "'");
  EXPECT_FALSE(fs::exists(out));
}

//===----------------------------------------------------------------------===//
// Inspect
//===----------------------------------------------------------------------===//

TEST(InspectTest, PrintsCountsAndWritesASheet) {
  fs::path dir = freshDir();
  fs::path src = makeImageTree(dir);
  ImageFolderOptions options;
  options.resolution = 4;
  options.heldout = 0.2;
  absl::StatusOr<DatasetIndex> index = buildImageFolderDataset(
      src.string(), (dir / "out").string(), options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(formatBuildSummary(*index),
            "wrote dataset 'pets' to " + (dir / "out").string() +
                ": heldout 1, train 4 samples of images [4, 4, 3] F32 in "
                "[-1, 1], 2 classes, 2 shards");

  InspectOptions inspect;
  inspect.sheetPath = (dir / "sheet.png").string();
  inspect.sheetCount = 3;
  std::string text;
  llvm::raw_string_ostream os(text);
  ASSERT_TRUE(inspectDataset((dir / "out").string(), inspect, os).ok());
  EXPECT_THAT(text, HasSubstr("dataset 'pets' in "));
  EXPECT_THAT(text, HasSubstr("features: images [4, 4, 3] F32 in [-1, 1]; "
                              "labels [] F32\n"));
  EXPECT_THAT(text, HasSubstr("split train: 4 samples in 1 shard\n"
                              "  train-00000.safetensors  4 samples  "));
  EXPECT_THAT(text, HasSubstr("checked 2 shards: sizes, checksums and shapes "
                              "match the index"));
  EXPECT_THAT(text, HasSubstr("class  heldout  train  name\n"
                              "    0        1      2  cat\n"
                              "    1        0      2  dog\n"));
  // 3 samples of 4 pixels, enlarged 8 times, 2-pixel gaps: 3 × 34 + 2 wide.
  EXPECT_THAT(text, HasSubstr("sheet: " + inspect.sheetPath +
                              " (104x36 pixels): the first 3 train samples"));
  std::string png = readFile(dir / "sheet.png");
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_EQ(png.substr(16, 8), std::string("\0\0\0\x68\0\0\0\x24", 8));

  // A corrupt shard: what the index says is printed, then the error.
  fs::path shard = dir / "out" / "train-00000.safetensors";
  std::string bytes = readFile(shard);
  // In the images (the labels, 4 floats, are last).
  bytes[bytes.size() - 20] ^= 1;
  writeFile(shard, bytes);
  text.clear();
  absl::Status status = inspectDataset((dir / "out").string(), inspect, os);
  EXPECT_THAT(status.message(), HasSubstr("is corrupt: crc32"));
  EXPECT_THAT(text, HasSubstr("split train: 4 samples"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("class  heldout")));

  // The held-out split's sheet, an empty split's, and a sheet too large.
  absl::StatusOr<std::pair<int64_t, int64_t>> heldout = writeContactSheet(
      *index, "heldout", 100, 10, (dir / "h.png").string());
  ASSERT_TRUE(heldout.ok()) << heldout.status();
  EXPECT_EQ(*heldout, (std::pair<int64_t, int64_t>{36, 36}));
  EXPECT_EQ(writeContactSheet(*index, "train", 4, 2, (dir / "big.png").string(),
                              /*maxPixels=*/1000)
                .status()
                .message(),
            "a contact sheet of 70x70 pixels is too large; show fewer samples");
  options.heldout = 0;
  options.writer.force = true;
  absl::StatusOr<DatasetIndex> none = buildImageFolderDataset(
      src.string(), (dir / "none").string(), options);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(writeContactSheet(*none, "heldout", 10, 10, (dir / "e.png").string())
                .status()
                .message(),
            "split 'heldout' has no samples to show");

  inspect.sheetCount = 0;
  inspect.checksums = false;
  text.clear();
  EXPECT_EQ(inspectDataset((dir / "out").string(), inspect, os).message(),
            "a contact sheet of 0 samples in 10 columns is empty");
  EXPECT_THAT(text, HasSubstr("(checksums not checked)"));
}

// `sddata images` that meets a bad image while rebuilding a dataset fails
// and leaves the dataset that was there readable, as it was.
TEST(ImageFolderTest, FailedRebuildKeepsTheOldDataset) {
  fs::path dir = freshDir();
  fs::path src = makeImageTree(dir);
  std::string out = (dir / "out").string();
  ImageFolderOptions options;
  options.resolution = 4;
  absl::StatusOr<DatasetIndex> built =
      buildImageFolderDataset(src.string(), out, options);
  ASSERT_TRUE(built.ok()) << built.status();
  std::string oldIndex = readFile(fs::path(out) / "index.json");

  writeFile(src / "dog" / "f.png", "\x89PNG\r\n\x1a\n broken");
  absl::StatusOr<DatasetIndex> failed =
      buildImageFolderDataset(src.string(), out, options);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("f.png' is not a valid PNG image"));
  EXPECT_EQ(readFile(fs::path(out) / "index.json"), oldIndex);
  absl::StatusOr<DatasetIndex> kept = readDatasetIndex(out);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(verifyDataset(*kept).ok());
  for (const fs::directory_entry &entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find(".sddata-"),
              std::string::npos)
        << entry.path();
}

// An image file of 8 GiB (sparse) is refused by its size, unread.
TEST(ImageFolderTest, HugeImageFileIsRefusedBySize) {
  fs::path dir = freshDir();
  fs::path src = makeImageTree(dir);
  writeFile(src / "dog" / "huge.png", "");
  fs::resize_file(src / "dog" / "huge.png", uint64_t(8) << 30);
  ImageFolderOptions options;
  options.resolution = 4;
  absl::StatusOr<DatasetIndex> index =
      buildImageFolderDataset(src.string(), (dir / "out").string(), options);
  EXPECT_EQ(index.status().message(),
            "cannot read image \"" + (src / "dog" / "huge.png").string() +
                "\": 8589934592 bytes is above the limit of 1073741824");
  EXPECT_FALSE(fs::exists(dir / "out"));
}

} // namespace
