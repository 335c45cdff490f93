//===- Inspect.cpp - What a dataset holds, in words and pictures ----------===//

#include "sd/Data/Inspect.h"

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Telemetry/LossPlot.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

namespace sd::data {

namespace {

/// "1 shard", "2 shards"; "1 class", "2 classes".
std::string plural(int64_t count, const char *word) {
  llvm::StringRef text(word);
  if (count == 1)
    return absl::StrCat(count, " ", word);
  return absl::StrCat(count, " ", word, text.ends_with("s") ? "es" : "s");
}

int64_t shardCount(const DatasetIndex &index) {
  int64_t shards = 0;
  for (const auto &[name, split] : index.splits)
    shards += static_cast<int64_t>(split.shards.size());
  return shards;
}

/// "images [8, 8, 1] F32 in [-1, 1]".
std::string describeSamples(const DatasetIndex &index) {
  std::string text = absl::StrCat(index.sampleFeature, " ",
                                  formatShape(index.sampleShape), " F32");
  if (index.range)
    absl::StrAppendFormat(&text, " in [%g, %g]", (*index.range)[0],
                          (*index.range)[1]);
  return text;
}

/// The index's content, before anything is read from the shards.
void printIndex(const DatasetIndex &index, llvm::raw_ostream &os) {
  os << absl::StrFormat("dataset '%s' in %s (%s version %d)\n", index.name,
                        index.dir, kDatasetFormat, kDatasetVersion);
  os << "source: " << index.source << "\n";
  os << "features: " << describeSamples(index);
  if (index.hasLabels)
    os << "; labels [] F32";
  if (index.embeddingShape)
    os << "; embeddings " << formatShape(*index.embeddingShape) << " F32";
  if (index.pooledShape)
    os << "; pooled_embeddings " << formatShape(*index.pooledShape) << " F32";
  os << "\n";
  if (index.hasLabels)
    os << "classes: " << index.classNames.size() << "\n";
  else
    os << "classes: none (no labels)\n";
  for (const auto &[name, split] : index.splits) {
    os << absl::StrFormat("split %s: %s in %s\n", name,
                          plural(split.count, "sample"),
                          plural(split.shards.size(), "shard"));
    for (const ShardInfo &shard : split.shards)
      os << absl::StrFormat("  %s  %s  %d bytes  crc32 %s\n", shard.file,
                            plural(shard.count, "sample"), shard.sizeBytes,
                            formatCrc32(shard.crc32));
  }
}

/// A table of samples per class: index, a column per split, the name.
void printClassCounts(const DatasetIndex &index,
                      const std::map<std::string, std::vector<int64_t>> &counts,
                      llvm::raw_ostream &os) {
  std::vector<size_t> widths;
  os << "class";
  for (const auto &[name, split] : index.splits) {
    widths.push_back(std::max<size_t>(name.size(),
                                      absl::StrCat(split.count).size()));
    os << absl::StrFormat("  %*s", widths.back(), name);
  }
  os << "  name\n";
  for (size_t c = 0; c < index.classNames.size(); ++c) {
    os << absl::StrFormat("%5d", c);
    size_t column = 0;
    for (const auto &[name, split] : index.splits)
      os << absl::StrFormat("  %*d", widths[column++], counts.at(name)[c]);
    os << "  " << (index.classNames[c].empty() ? "\"\"" : index.classNames[c])
       << "\n";
  }
}

} // namespace

std::string formatBuildSummary(const DatasetIndex &index) {
  std::vector<std::string> splits;
  for (const auto &[name, split] : index.splits)
    splits.push_back(absl::StrCat(name, " ", split.count));
  return absl::StrFormat(
      "wrote dataset '%s' to %s: %s samples of %s, %s, %s", index.name,
      index.dir, absl::StrJoin(splits, ", "), describeSamples(index),
      plural(index.classNames.size(), "class"),
      plural(shardCount(index), "shard"));
}

absl::StatusOr<std::map<std::string, std::vector<int64_t>>>
countClasses(const DatasetIndex &index) {
  std::map<std::string, std::vector<int64_t>> counts;
  for (const auto &[name, split] : index.splits) {
    std::vector<int64_t> &perClass = counts[name];
    perClass.assign(index.classNames.size(), 0);
    if (!index.hasLabels)
      continue;
    absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, name);
    if (!reader.ok())
      return reader.status();
    std::vector<int64_t> all(static_cast<size_t>(reader->size()));
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = static_cast<int64_t>(i);
    std::vector<float> labels(all.size());
    if (absl::Status status =
            reader->readSamples(all, nullptr, labels.data(), nullptr);
        !status.ok())
      return status;
    for (float label : labels)
      ++perClass[static_cast<size_t>(label)];
  }
  return counts;
}

absl::StatusOr<std::pair<int64_t, int64_t>>
writeContactSheet(const DatasetIndex &index, const std::string &split,
                  int64_t count, int64_t columns, const std::string &path,
                  int64_t maxPixels) {
  if (count < 1 || columns < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "a contact sheet of %d samples in %d columns is empty", count,
        columns));
  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, split);
  if (!reader.ok())
    return reader.status();
  count = std::min(count, reader->size());
  if (count == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("split '", split, "' has no samples to show"));
  std::vector<int64_t> first(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    first[static_cast<size_t>(i)] = i;
  std::vector<float> samples(static_cast<size_t>(count * reader->sampleElements()));
  if (absl::Status status =
          reader->readSamples(first, samples.data(), nullptr, nullptr);
      !status.ok())
    return status;

  // Video latents [F, H, W, C] show their first frame.
  size_t rank = index.sampleShape.size();
  int64_t height = index.sampleShape[rank - 3],
          width = index.sampleShape[rank - 2],
          channels = index.sampleShape[rank - 1];
  double low, high;
  if (index.range) {
    low = (*index.range)[0];
    high = (*index.range)[1];
  } else {
    auto [minimum, maximum] = std::minmax_element(samples.begin(), samples.end());
    low = *minimum;
    high = *maximum > *minimum ? *maximum : *minimum + 1;
  }
  // Enlarged so that 8×8 digits are visible; 2 pixels between cells.
  int64_t zoom = std::max<int64_t>(1, (32 + std::max(height, width) - 1) /
                                          std::max(height, width));
  constexpr int64_t kGap = 2;
  constexpr uint8_t kBackground = 64;
  columns = std::min(columns, count);
  int64_t rows = (count + columns - 1) / columns;
  int64_t cellWidth = width * zoom + kGap, cellHeight = height * zoom + kGap;
  int64_t sheetWidth = columns * cellWidth + kGap;
  int64_t sheetHeight = rows * cellHeight + kGap;
  if (sheetWidth * sheetHeight > maxPixels)
    return absl::InvalidArgumentError(absl::StrFormat(
        "a contact sheet of %dx%d pixels is too large; show fewer samples",
        sheetWidth, sheetHeight));
  std::vector<uint8_t> rgb(static_cast<size_t>(sheetWidth * sheetHeight * 3),
                           kBackground);
  auto toByte = [&](float value) {
    double scaled = (value - low) / (high - low) * 255.0;
    return static_cast<uint8_t>(std::lround(std::clamp(scaled, 0.0, 255.0)));
  };
  for (int64_t s = 0; s < count; ++s) {
    const float *sample = samples.data() + s * reader->sampleElements();
    int64_t left = kGap + (s % columns) * cellWidth;
    int64_t top = kGap + (s / columns) * cellHeight;
    for (int64_t y = 0; y < height * zoom; ++y)
      for (int64_t x = 0; x < width * zoom; ++x) {
        const float *pixel = sample + ((y / zoom) * width + x / zoom) * channels;
        uint8_t *out = rgb.data() + ((top + y) * sheetWidth + left + x) * 3;
        for (int64_t c = 0; c < 3; ++c)
          out[c] = toByte(pixel[channels == 3 ? c : 0]);
      }
  }
  std::string png;
  if (absl::Status status = telemetry::encodePng(
          static_cast<int>(sheetWidth), static_cast<int>(sheetHeight), rgb,
          png);
      !status.ok())
    return status;
  if (absl::Status status = ckpt::writeFileAtomically(path, png); !status.ok())
    return status;
  return std::pair{sheetWidth, sheetHeight};
}

absl::Status inspectDataset(const std::string &dir,
                            const InspectOptions &options,
                            llvm::raw_ostream &os) {
  absl::StatusOr<DatasetIndex> index = readDatasetIndex(dir);
  if (!index.ok())
    return index.status();
  printIndex(*index, os);
  if (absl::Status status = verifyDataset(*index, options.checksums);
      !status.ok())
    return status;
  os << "checked " << plural(shardCount(*index), "shard") << ": "
     << (options.checksums ? "sizes, checksums and shapes match the index"
                           : "sizes and shapes match the index (checksums "
                             "not checked)")
     << (options.checksums && index->hasLabels ? "; labels are class indices"
                                               : "")
     << (options.checksums ? "; values are finite\n" : "\n");
  if (index->hasLabels) {
    absl::StatusOr<std::map<std::string, std::vector<int64_t>>> counts =
        countClasses(*index);
    if (!counts.ok())
      return counts.status();
    printClassCounts(*index, *counts, os);
  }
  if (options.sheetPath.empty())
    return absl::OkStatus();
  absl::StatusOr<std::pair<int64_t, int64_t>> size =
      writeContactSheet(*index, options.sheetSplit, options.sheetCount,
                        options.sheetColumns, options.sheetPath);
  if (!size.ok())
    return size.status();
  os << absl::StrFormat("sheet: %s (%dx%d pixels): the first %d %s samples\n",
                        options.sheetPath, size->first, size->second,
                        std::min(options.sheetCount,
                                 index->splits.at(options.sheetSplit).count),
                        options.sheetSplit);
  return absl::OkStatus();
}

} // namespace sd::data
