//===- Digits.cpp - The scikit-learn digits as an sd dataset --------------===//
//
// scikit-learn ships the UCI optical-recognition digits (1,797 images of
// 8×8 pixels, 16 levels) as digits.csv.gz; Debian's python3-sklearn puts it
// under /usr/lib/python3/dist-packages. It is read whole (a regular file of
// bounded size) and inflated by zlib in memory, bounded too; an
// uncompressed CSV is read as is.
//
//===----------------------------------------------------------------------===//

#include "sd/Data/Builders.h"

#include "sd/Data/Image.h"
#include "sd/Data/Split.h"
#include "sd/Support/Files.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <zlib.h>

#include <cmath>

namespace sd::data {

namespace {

/// The text of the gzip `bytes` (its members one after the other), or an
/// error past `maxBytes` of text: a small file may inflate to any size.
absl::StatusOr<std::string> gunzip(llvm::StringRef bytes,
                                   const std::string &path, uint64_t maxBytes) {
  auto invalid = [&](const std::string &why) {
    return absl::DataLossError(absl::StrCat(
        "digits file '", path, "' is not a valid gzip file: ", why));
  };
  z_stream stream = {};
  // 16: a gzip header and trailer around the deflate data.
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK)
    return absl::ResourceExhaustedError("cannot start zlib's inflate");
  stream.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  std::string text;
  char chunk[1 << 16];
  int result = Z_OK;
  while (true) {
    stream.next_out = reinterpret_cast<Bytef *>(chunk);
    stream.avail_out = sizeof(chunk);
    result = inflate(&stream, Z_NO_FLUSH);
    text.append(chunk, sizeof(chunk) - stream.avail_out);
    if (text.size() > maxBytes) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError(absl::StrFormat(
          "digits file '%s' inflates to more than %d bytes", path, maxBytes));
    }
    if (result == Z_STREAM_END && stream.avail_in > 0) {
      inflateReset(&stream); // The next member.
      continue;
    }
    if (result == Z_STREAM_END)
      break;
    if (result != Z_OK) {
      std::string message = stream.msg ? stream.msg : "unexpected end of file";
      inflateEnd(&stream);
      return invalid(message);
    }
    if (stream.avail_in == 0 && stream.avail_out > 0) {
      inflateEnd(&stream);
      return invalid("unexpected end of file");
    }
  }
  inflateEnd(&stream);
  return text;
}

/// The whole (decompressed) content of `path`.
absl::StatusOr<std::string> readGzipOrPlain(const std::string &path) {
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      readRegularFile(path, "digits file", kMaxDigitsFileBytes);
  if (absl::IsNotFound(file.status()))
    return absl::NotFoundError(absl::StrCat(
        "digits file '", path,
        "' does not exist (install python3-sklearn, or pass --digits-csv)"));
  if (!file.ok())
    return file.status();
  llvm::StringRef bytes = (*file)->getBuffer();
  if (!bytes.starts_with("\x1f\x8b"))
    return bytes.str();
  return gunzip(bytes, path, kMaxDigitsFileBytes);
}

/// An integer in [low, high] written as a number ("7" or "7.0"), or nullopt.
std::optional<int64_t> integerIn(llvm::StringRef field, int64_t low,
                                 int64_t high) {
  double value;
  if (field.trim().getAsDouble(value) || value != std::floor(value) ||
      value < low || value > high)
    return std::nullopt;
  return static_cast<int64_t>(value);
}

} // namespace

absl::StatusOr<std::vector<Digit>> readDigitsCsv(const std::string &path) {
  absl::StatusOr<std::string> text = readGzipOrPlain(path);
  if (!text.ok())
    return text.status();
  std::vector<Digit> digits;
  llvm::SmallVector<llvm::StringRef, 8> lines;
  llvm::StringRef(*text).split(lines, '\n');
  for (size_t number = 1; number <= lines.size(); ++number) {
    llvm::StringRef line = lines[number - 1].rtrim("\r");
    if (line.trim().empty())
      continue;
    auto error = [&](const std::string &problem) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "digits file '%s' line %d: %s", path, number, problem));
    };
    llvm::SmallVector<llvm::StringRef, 65> fields;
    line.split(fields, ',');
    if (fields.size() != 65)
      return error(absl::StrFormat(
          "expected 65 comma-separated values (64 pixels and the label), "
          "found %d",
          fields.size()));
    Digit digit;
    for (size_t i = 0; i < 64; ++i) {
      std::optional<int64_t> pixel = integerIn(fields[i], 0, 16);
      if (!pixel)
        return error(absl::StrCat("pixel ", i, " '", fields[i].str(),
                                  "' is not an integer in 0..16"));
      digit.pixels[i] = static_cast<float>(*pixel);
    }
    std::optional<int64_t> label = integerIn(fields[64], 0, 9);
    if (!label)
      return error(absl::StrCat("label '", fields[64].str(),
                                "' is not a digit 0..9"));
    digit.label = *label;
    digits.push_back(digit);
  }
  if (digits.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("digits file '", path, "' holds no digits"));
  return digits;
}

absl::StatusOr<DatasetIndex> buildDigitsDataset(const std::string &outDir,
                                                const DigitsOptions &options) {
  if (options.resolution != 8 && options.resolution != 16)
    return absl::InvalidArgumentError(absl::StrFormat(
        "digits resolution %d is not supported; use 8 or 16",
        options.resolution));
  if (absl::Status status = checkHeldoutFraction(options.heldout);
      !status.ok())
    return status;
  absl::StatusOr<std::vector<Digit>> digits = readDigitsCsv(options.csvPath);
  if (!digits.ok())
    return digits.status();

  int64_t resolution = options.resolution;
  DatasetIndex header;
  header.name = "digits";
  header.source = absl::StrFormat(
      "sddata digits: scikit-learn's handwritten digits from %s (%d images "
      "of 8x8%s); held-out fraction %g (stratified), seed %d",
      options.csvPath, digits->size(),
      resolution == 16 ? ", upscaled bilinear to 16x16" : "", options.heldout,
      options.seed);
  header.sampleShape = {resolution, resolution, 1};
  header.range = std::array<double, 2>{-1.0, 1.0};
  for (int digit = 0; digit < 10; ++digit)
    header.classNames.push_back(std::to_string(digit));
  header.splits["train"];
  header.splits["heldout"];
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(outDir, std::move(header), options.writer);
  if (!writer.ok())
    return writer.status();

  std::vector<int64_t> labels;
  for (const Digit &digit : *digits)
    labels.push_back(digit.label);
  HeldoutSplit split = splitHeldout(labels, 10, options.heldout, options.seed);
  for (const auto &[name, indices] :
       {std::pair{"train", &split.train}, {"heldout", &split.heldout}})
    for (int64_t index : *indices) {
      const Digit &digit = (*digits)[static_cast<size_t>(index)];
      Image image{8, 8, 1, {digit.pixels.begin(), digit.pixels.end()}};
      if (resolution != 8)
        image = resizeImage(image, resolution, resolution);
      for (float &value : image.pixels)
        value = value / 16.0f * 2.0f - 1.0f;
      if (absl::Status status =
              writer->add(name, image.pixels, digit.label);
          !status.ok())
        return status;
    }
  return writer->finish();
}

} // namespace sd::data
