//===- ImageFolder.cpp - A directory of images as an sd dataset -----------===//
//
// The layout torchvision's ImageFolder reads: SRC/<class>/<image>. Files are
// listed first (sorted, so the dataset does not depend on the order the file
// system lists them in), split by the seed, and then decoded one at a time
// into the writer, so only one shard of pixels is in memory.
//
//===----------------------------------------------------------------------===//

#include "sd/Data/Builders.h"

#include "sd/Data/Image.h"
#include "sd/Data/Split.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace fs = std::filesystem;

namespace sd::data {

namespace {

/// A source image and its class.
struct SourceImage {
  std::string path;
  int64_t label = 0;
};

bool isHidden(const fs::path &path) {
  return path.filename().string().rfind('.', 0) == 0;
}

bool isImageFile(const fs::path &path) {
  std::string extension = llvm::StringRef(path.extension().string()).lower();
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg";
}

absl::Status listError(const fs::path &path, const std::error_code &error) {
  return absl::UnknownError(
      absl::StrCat("cannot list '", path.string(), "': ", error.message()));
}

/// The image files under `dir` (subdirectories too), sorted by path.
absl::StatusOr<std::vector<std::string>> listImages(const fs::path &dir) {
  std::vector<std::string> files;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error), end;
  if (error)
    return listError(dir, error);
  for (; it != end; it.increment(error)) {
    if (error)
      return listError(dir, error);
    if (isHidden(it->path())) {
      if (it->is_directory(error))
        it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(error) && isImageFile(it->path()))
      files.push_back(it->path().string());
  }
  if (error)
    return listError(dir, error);
  std::sort(files.begin(), files.end());
  return files;
}

/// The classes (subdirectory names) and images of `srcDir`.
absl::Status listSource(const std::string &srcDir,
                        std::vector<std::string> &classNames,
                        std::vector<SourceImage> &images) {
  std::error_code error;
  if (!fs::is_directory(srcDir, error))
    return absl::NotFoundError(
        absl::StrCat("image directory '", srcDir, "' does not exist"));
  std::vector<std::string> classDirs, rootImages;
  fs::directory_iterator it(srcDir, error), end;
  if (error)
    return listError(srcDir, error);
  for (; it != end; it.increment(error)) {
    if (error)
      return listError(srcDir, error);
    if (isHidden(it->path()))
      continue;
    if (it->is_directory(error))
      classDirs.push_back(it->path().filename().string());
    else if (it->is_regular_file(error) && isImageFile(it->path()))
      rootImages.push_back(it->path().string());
  }
  std::sort(classDirs.begin(), classDirs.end());
  std::sort(rootImages.begin(), rootImages.end());

  if (!classDirs.empty() && !rootImages.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "'", srcDir, "' has both class subdirectories and images ('",
        rootImages.front(), "'); put every image in its class's "
                            "subdirectory"));
  if (classDirs.empty()) {
    if (rootImages.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "'", srcDir, "' holds no PNG or JPEG images"));
    // No subdirectories: one unnamed class.
    classNames = {""};
    for (std::string &path : rootImages)
      images.push_back({std::move(path), 0});
    return absl::OkStatus();
  }
  for (const std::string &name : classDirs) {
    fs::path dir = fs::path(srcDir) / name;
    absl::StatusOr<std::vector<std::string>> files = listImages(dir);
    if (!files.ok())
      return files.status();
    if (files->empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "class directory '", dir.string(), "' holds no PNG or JPEG images"));
    for (std::string &path : *files)
      images.push_back({std::move(path),
                        static_cast<int64_t>(classNames.size())});
    classNames.push_back(name);
  }
  return absl::OkStatus();
}

/// Whether `inner` is `outer` or lies inside it.
bool isInside(const std::string &inner, const std::string &outer) {
  std::error_code error;
  fs::path a = fs::weakly_canonical(inner, error);
  fs::path b = fs::weakly_canonical(outer, error);
  if (error)
    return false;
  auto mismatch = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return mismatch.first == b.end();
}

/// The source directory's last component ("images" for "/").
std::string defaultName(const std::string &srcDir) {
  fs::path path = fs::path(srcDir).lexically_normal();
  std::string name = path.filename().string();
  if (name.empty())
    name = path.parent_path().filename().string();
  return name.empty() || name == "." || name == ".." ? "images" : name;
}

} // namespace

absl::StatusOr<DatasetIndex>
buildImageFolderDataset(const std::string &srcDir, const std::string &outDir,
                        const ImageFolderOptions &options) {
  if (options.resolution < 1 || options.resolution > 4096)
    return absl::InvalidArgumentError(absl::StrFormat(
        "resolution %d must be in [1, 4096]", options.resolution));
  if (options.channels != 1 && options.channels != 3)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d channels are not supported; use 1 or 3", options.channels));
  if (absl::Status status = checkHeldoutFraction(options.heldout);
      !status.ok())
    return status;
  std::vector<std::string> classNames;
  std::vector<SourceImage> images;
  if (absl::Status status = listSource(srcDir, classNames, images);
      !status.ok())
    return status;
  if (isInside(outDir, srcDir))
    return absl::InvalidArgumentError(
        absl::StrCat("output directory '", outDir,
                     "' is inside the image directory '", srcDir, "'"));

  int64_t resolution = options.resolution;
  DatasetIndex header;
  header.name = options.name.empty() ? defaultName(srcDir) : options.name;
  header.sampleShape = {resolution, resolution, options.channels};
  header.range = std::array<double, 2>{-1.0, 1.0};
  header.classNames = classNames;
  header.splits["train"];
  header.splits["heldout"];
  header.source = absl::StrFormat(
      "sddata images: %d images from %s in %d %s, center-cropped, resized "
      "to %dx%d (area down, bilinear up), %d channel%s; held-out fraction "
      "%g (stratified), seed %d",
      images.size(), srcDir, classNames.size(),
      classNames.size() == 1 ? "class" : "classes", resolution, resolution,
      options.channels, options.channels == 1 ? "" : "s", options.heldout,
      options.seed);
  absl::StatusOr<DatasetWriter> writer =
      DatasetWriter::create(outDir, std::move(header), options.writer);
  if (!writer.ok())
    return writer.status();

  std::vector<int64_t> labels;
  for (const SourceImage &image : images)
    labels.push_back(image.label);
  HeldoutSplit split =
      splitHeldout(labels, static_cast<int64_t>(classNames.size()),
                   options.heldout, options.seed);
  int64_t skipped = 0;
  for (const auto &[name, indices] :
       {std::pair{"train", &split.train}, {"heldout", &split.heldout}})
    for (int64_t index : *indices) {
      const SourceImage &file = images[static_cast<size_t>(index)];
      absl::StatusOr<Image> image = readImage(file.path, options.channels);
      if (!image.ok()) {
        if (!options.skipBad)
          return image.status();
        ++skipped;
        if (options.warn)
          options.warn(absl::StrCat(image.status().message(), "; skipped"));
        continue;
      }
      Image square = resizeImage(centerCrop(*image), resolution, resolution);
      for (float &value : square.pixels)
        value = value / 127.5f - 1.0f;
      if (absl::Status status = writer->add(name, square.pixels, file.label);
          !status.ok())
        return status;
    }
  if (skipped > 0)
    writer->setSource(absl::StrFormat("%s; %d unreadable images skipped",
                                      writer->source(), skipped));
  return writer->finish();
}

} // namespace sd::data
