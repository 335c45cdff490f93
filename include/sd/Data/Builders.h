//===- Builders.h - Datasets from scikit-learn digits and images -*- C++ -*-===//
//
// The two datasets `sddata` builds: scikit-learn's handwritten digits (real
// data that trains in minutes on a laptop) and a directory of PNG/JPEG
// images with a class per subdirectory. Both write train and heldout splits
// chosen by a seed (sd/Data/Split.h) through DatasetWriter.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_BUILDERS_H
#define SD_DATA_BUILDERS_H

#include "sd/Data/DatasetWriter.h"

#include <functional>

namespace sd::data {

/// Where Debian's python3-sklearn installs the digits.
inline constexpr const char *kDefaultDigitsCsv =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

struct DigitsOptions {
  /// scikit-learn's digits.csv.gz (or the same CSV uncompressed): a row per
  /// image, 64 pixel values in 0..16 (8×8, row-major) and the label 0..9.
  std::string csvPath = kDefaultDigitsCsv;
  /// 8 (as stored) or 16 (bilinear upscaling, see resizeImage).
  int64_t resolution = 8;
  /// The fraction of samples held out (stratified, see splitHeldout).
  double heldout = 0.1;
  uint64_t seed = 0;
  DatasetWriterOptions writer;
};

/// One digit: 64 values in 0..16, rows top first, and its class.
struct Digit {
  std::array<float, 64> pixels;
  int64_t label = 0;
};

/// The largest digits file read, and the most text it may inflate to: the
/// real one is 57 KiB compressed and 265 KiB of text.
inline constexpr uint64_t kMaxDigitsFileBytes = uint64_t(64) << 20;

/// Reads the digits CSV (gzip-compressed or not), a regular file of at most
/// kMaxDigitsFileBytes (sd::readRegularFile); errors name the file and the
/// line.
absl::StatusOr<std::vector<Digit>> readDigitsCsv(const std::string &path);

/// Builds dataset "digits" in `outDir`: images [R, R, 1] with ink at +1 and
/// paper at -1 (v / 16 × 2 − 1), classes "0".."9", splits train and
/// heldout.
absl::StatusOr<DatasetIndex> buildDigitsDataset(const std::string &outDir,
                                                const DigitsOptions &options);

struct ImageFolderOptions {
  /// Side of the square images in the dataset, in [1, 4096].
  int64_t resolution = 0;
  /// 1 (grayscale) or 3 (RGB).
  int64_t channels = 3;
  double heldout = 0.1;
  uint64_t seed = 0;
  /// The dataset's name; empty for the source directory's name.
  std::string name;
  /// Skip images that do not decode (calling `warn` for each) instead of
  /// failing.
  bool skipBad = false;
  std::function<void(const std::string &)> warn;
  DatasetWriterOptions writer;
};

/// Builds a dataset from the images in `srcDir`: each subdirectory (in
/// byte order of the names) is a class, holding its .png, .jpg and .jpeg
/// files (any case, subdirectories included); other files and names
/// starting with '.' are ignored. A directory with images and no
/// subdirectories is one class named "". Each image is decoded, converted
/// to `channels`, center-cropped to a square, resized to `resolution` and
/// scaled from [0, 255] to [-1, 1]. Errors name the file.
absl::StatusOr<DatasetIndex>
buildImageFolderDataset(const std::string &srcDir, const std::string &outDir,
                        const ImageFolderOptions &options);

} // namespace sd::data

#endif // SD_DATA_BUILDERS_H
