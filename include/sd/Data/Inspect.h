//===- Inspect.h - What a dataset holds, in words and pictures --*- C++ -*-===//
//
// `sddata inspect`: the index in readable form, the shards checked, samples
// counted per class and split, and optionally a PNG contact sheet of the
// first samples, to see at a glance that the data is what it should be.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_INSPECT_H
#define SD_DATA_INSPECT_H

#include "sd/Data/Dataset.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace sd::data {

struct InspectOptions {
  /// Check the shards' CRC-32s and labels (reads every byte); without, only
  /// their presence, sizes and tensor shapes.
  bool checksums = true;
  /// Where to write the contact sheet; none when empty.
  std::string sheetPath;
  std::string sheetSplit = "train";
  int64_t sheetCount = 100;
  int64_t sheetColumns = 10;
};

/// One line about a just-built dataset: its name, directory, samples per
/// split, sample shape, classes and shards.
std::string formatBuildSummary(const DatasetIndex &index);

/// Prints the dataset in `dir` to `os` (name, source, features, classes,
/// splits and their shards), checks it with verifyDataset, prints the
/// samples per class and split, and writes the contact sheet. The first
/// problem is returned (what was printed before it stays printed).
absl::Status inspectDataset(const std::string &dir,
                            const InspectOptions &options,
                            llvm::raw_ostream &os);

/// Samples per class (index = label) in each split.
absl::StatusOr<std::map<std::string, std::vector<int64_t>>>
countClasses(const DatasetIndex &index);

/// Writes the first `count` samples of `split` as a PNG grid of `columns`
/// per row, row by row, on a dark gray background. Each sample is enlarged
/// (nearest) to at least 32 pixels; 3 channels show as RGB, other counts as
/// the first channel in gray; values map from the feature's range (the
/// shown samples' min and max when it has none) to 0..255. A sheet of more
/// than `maxPixels` is refused (InvalidArgument). Returns the sheet's size
/// in pixels.
absl::StatusOr<std::pair<int64_t, int64_t>>
writeContactSheet(const DatasetIndex &index, const std::string &split,
                  int64_t count, int64_t columns, const std::string &path,
                  int64_t maxPixels = int64_t(1) << 28);

} // namespace sd::data

#endif // SD_DATA_INSPECT_H
