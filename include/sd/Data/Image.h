//===- Image.h - Decoding, cropping and resizing images ---------*- C++ -*-===//
//
// What `sddata images` does to each file: decode a PNG (libpng) or JPEG
// (libjpeg), convert it to 1 or 3 channels, crop the largest centered
// square, and resize it to the dataset's resolution. Pixels stay floats in
// [0, 255] until the dataset scales them to [-1, 1].
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_IMAGE_H
#define SD_DATA_IMAGE_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sd::data {

/// An image as floats in [0, 255]: rows top first, channels last.
struct Image {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;
  std::vector<float> pixels;

  float at(int64_t y, int64_t x, int64_t c) const {
    return pixels[static_cast<size_t>((y * width + x) * channels + c)];
  }
};

/// The most values (width × height × channels asked for) sd decodes from
/// one image, 1 GiB of floats: a small file that claims a huge size is
/// refused by its header, before anything is allocated for its pixels.
inline constexpr int64_t kMaxImageValues = int64_t(1) << 28;
/// The largest image file read (sd::readRegularFile).
inline constexpr uint64_t kMaxImageFileBytes = uint64_t(1) << 30;

/// Decodes PNG or JPEG `bytes` (told apart by their signature, not by the
/// file name) into an image of `channels` (1 or 3). Any PNG (grayscale,
/// RGB, palette, with alpha, 16-bit) and grayscale or RGB JPEGs are read;
/// alpha is composited over white; RGB becomes one channel as the luma
/// 0.299 R + 0.587 G + 0.114 B, and gray becomes three equal ones. A file
/// that does not decode cleanly (libjpeg's warnings about corrupt or
/// truncated data included) is InvalidArgument naming `fileName` and the
/// decoder's message; so is one whose header declares more than
/// kMaxImageValues.
absl::StatusOr<Image> decodeImage(std::string_view bytes,
                                  const std::string &fileName,
                                  int64_t channels);

/// Reads and decodes the file at `path`, a regular file of at most
/// kMaxImageFileBytes (errors name it).
absl::StatusOr<Image> readImage(const std::string &path, int64_t channels);

/// The largest square centered in `image` (the extra row or column of an
/// odd difference is cut from the bottom or right).
Image centerCrop(const Image &image);

/// Resizes `image` to `width` × `height`, each axis on its own: area
/// averaging when it shrinks (each output pixel is the mean of the input it
/// covers, partial pixels weighted), bilinear interpolation with
/// half-pixel centers (edges clamped) when it grows.
Image resizeImage(const Image &image, int64_t width, int64_t height);

} // namespace sd::data

#endif // SD_DATA_IMAGE_H
