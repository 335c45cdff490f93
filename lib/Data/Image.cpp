//===- Image.cpp - Decoding, cropping and resizing images -----------------===//
//
// PNG through libpng's simplified API (which handles every color type and
// bit depth, and reports errors without longjmp into our code); JPEG through
// libjpeg, whose error handler must not return, so it longjmps out of the
// one small function that calls libjpeg.
//
//===----------------------------------------------------------------------===//

#include "sd/Data/Image.h"

#include "sd/Support/Files.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/MemoryBuffer.h"

#include <png.h>
// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstring>

namespace sd::data {

namespace {

/// An 8-bit decoded image before conversion: RGB or RGBA.
struct Decoded {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;
  std::vector<uint8_t> bytes;
};

/// Whether an image of `width` × `height` pixels, decoded to `channels`,
/// is within kMaxImageValues (and not empty).
bool fits(int64_t width, int64_t height, int64_t channels) {
  int64_t pixels, values;
  return width > 0 && height > 0 &&
         !__builtin_mul_overflow(width, height, &pixels) &&
         !__builtin_mul_overflow(pixels, channels, &values) &&
         values <= kMaxImageValues;
}

absl::Status tooLarge(const std::string &fileName, int64_t width,
                      int64_t height, int64_t channels) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "'%s' is %dx%d pixels of %d channel%s; sd decodes images of at most "
      "%d values",
      fileName, width, height, channels, channels == 1 ? "" : "s",
      kMaxImageValues));
}

absl::StatusOr<Decoded> decodePng(std::string_view bytes,
                                  const std::string &fileName,
                                  int64_t channels) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  auto failed = [&] {
    std::string message = image.message;
    png_image_free(&image);
    return absl::InvalidArgumentError(absl::StrCat(
        "'", fileName, "' is not a valid PNG image: ", message));
  };
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    return failed();
  // Four bytes a pixel below, then `channels` floats of four bytes each:
  // no larger than the limit's floats.
  if (!fits(image.width, image.height, channels)) {
    png_image_free(&image);
    return tooLarge(fileName, image.width, image.height, channels);
  }
  // 16-bit samples are sRGB-encoded like 8-bit ones in practice; without
  // this flag libpng would take them as linear and gamma-encode them.
  image.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  image.format = PNG_FORMAT_RGBA;
  Decoded decoded;
  decoded.width = image.width;
  decoded.height = image.height;
  decoded.channels = 4;
  decoded.bytes.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, /*background=*/nullptr,
                             decoded.bytes.data(), /*row_stride=*/0,
                             /*colormap=*/nullptr))
    return failed();
  return decoded;
}

/// libjpeg's error manager with a way out and the first message.
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf exit;
  char message[JMSG_LENGTH_MAX];
  bool warned;
};

[[noreturn]] void onJpegError(j_common_ptr info) {
  auto *errors = reinterpret_cast<JpegErrors *>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->exit, 1);
}

/// Warnings (level -1) are corrupt or truncated data that libjpeg papers
/// over; sd takes the first one as the error. Trace messages are ignored.
void onJpegMessage(j_common_ptr info, int level) {
  auto *errors = reinterpret_cast<JpegErrors *>(info->err);
  if (level != -1 || errors->warned)
    return;
  (*info->err->format_message)(info, errors->message);
  errors->warned = true;
}

/// Decodes JPEG `bytes` as RGB into `rgb`; false with `errors.message` on
/// failure. Only plain data lives in this frame, so that longjmp (from
/// onJpegError) skips no destructor; `rgb` is the caller's.
bool decodeJpegRgb(const unsigned char *bytes, size_t size, int64_t channels,
                   JpegErrors &errors, std::vector<uint8_t> &rgb,
                   int64_t &width, int64_t &height) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = onJpegError;
  errors.manager.emit_message = onJpegMessage;
  errors.message[0] = '\0';
  errors.warned = false;
  if (setjmp(errors.exit)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    std::snprintf(errors.message, sizeof(errors.message),
                  "CMYK JPEGs are not supported (only grayscale and RGB)");
    jpeg_destroy_decompress(&info);
    return false;
  }
  info.out_color_space = JCS_RGB;
  if (!fits(info.image_width, info.image_height, channels)) {
    width = info.image_width;
    height = info.image_height;
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_start_decompress(&info);
  width = info.output_width;
  height = info.output_height;
  rgb.resize(static_cast<size_t>(width * height * 3));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = rgb.data() + static_cast<size_t>(info.output_scanline) *
                                    static_cast<size_t>(width) * 3;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return !errors.warned;
}

absl::StatusOr<Decoded> decodeJpeg(std::string_view bytes,
                                   const std::string &fileName,
                                   int64_t channels) {
  Decoded decoded;
  decoded.channels = 3;
  JpegErrors errors;
  if (!decodeJpegRgb(reinterpret_cast<const unsigned char *>(bytes.data()),
                     bytes.size(), channels, errors, decoded.bytes,
                     decoded.width, decoded.height)) {
    if (errors.message[0] == '\0')
      return tooLarge(fileName, decoded.width, decoded.height, channels);
    return absl::InvalidArgumentError(absl::StrCat(
        "'", fileName, "' is not a valid JPEG image: ", errors.message));
  }
  return decoded;
}

} // namespace

absl::StatusOr<Image> decodeImage(std::string_view bytes,
                                  const std::string &fileName,
                                  int64_t channels) {
  if (channels != 1 && channels != 3)
    return absl::InvalidArgumentError(
        absl::StrFormat("%d channels; images have 1 or 3", channels));
  static constexpr std::string_view kPngSignature = "\x89PNG\r\n\x1a\n";
  static constexpr std::string_view kJpegSignature = "\xff\xd8\xff";
  absl::StatusOr<Decoded> decoded;
  if (bytes.substr(0, kPngSignature.size()) == kPngSignature)
    decoded = decodePng(bytes, fileName, channels);
  else if (bytes.substr(0, kJpegSignature.size()) == kJpegSignature)
    decoded = decodeJpeg(bytes, fileName, channels);
  else
    return absl::InvalidArgumentError(
        absl::StrCat("'", fileName, "' is neither a PNG nor a JPEG image"));
  if (!decoded.ok())
    return decoded.status();

  Image image;
  image.width = decoded->width;
  image.height = decoded->height;
  image.channels = channels;
  image.pixels.resize(static_cast<size_t>(image.width * image.height *
                                          channels));
  int64_t pixels = image.width * image.height;
  for (int64_t p = 0; p < pixels; ++p) {
    const uint8_t *in = decoded->bytes.data() + p * decoded->channels;
    float rgb[3] = {float(in[0]), float(in[1]), float(in[2])};
    if (decoded->channels == 4) {
      // Over white: what a viewer shows for a transparent background.
      float alpha = in[3] / 255.0f;
      for (float &value : rgb)
        value = value * alpha + 255.0f * (1.0f - alpha);
    }
    float *out = image.pixels.data() + p * channels;
    if (channels == 1)
      out[0] = 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
    else
      std::copy(rgb, rgb + 3, out);
  }
  return image;
}

absl::StatusOr<Image> readImage(const std::string &path, int64_t channels) {
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> bytes =
      readRegularFile(path, "image", kMaxImageFileBytes);
  if (!bytes.ok())
    return bytes.status();
  return decodeImage(std::string_view((*bytes)->getBuffer()), path, channels);
}

Image centerCrop(const Image &image) {
  int64_t side = std::min(image.width, image.height);
  int64_t left = (image.width - side) / 2;
  int64_t top = (image.height - side) / 2;
  Image cropped;
  cropped.width = cropped.height = side;
  cropped.channels = image.channels;
  cropped.pixels.reserve(static_cast<size_t>(side * side * image.channels));
  for (int64_t y = top; y < top + side; ++y) {
    auto row = image.pixels.begin() + (y * image.width + left) * image.channels;
    cropped.pixels.insert(cropped.pixels.end(), row,
                          row + side * image.channels);
  }
  return cropped;
}

namespace {

/// One input pixel's weight in an output pixel.
struct Tap {
  int64_t index;
  float weight;
};

/// For each of `out` output positions along an axis of `in` pixels, the
/// input pixels and weights that make it (see resizeImage).
std::vector<std::vector<Tap>> resizeTaps(int64_t in, int64_t out) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out));
  double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t o = 0; o < out; ++o) {
    std::vector<Tap> &list = taps[static_cast<size_t>(o)];
    if (out < in) {
      // Area: the input interval [o, o + 1) × scale, partial pixels weighted
      // by how much of them it covers.
      double low = o * scale, high = (o + 1) * scale;
      for (int64_t i = static_cast<int64_t>(std::floor(low));
           i < std::min<int64_t>(in, static_cast<int64_t>(std::ceil(high)));
           ++i) {
        double overlap = std::min(high, double(i + 1)) - std::max(low, double(i));
        if (overlap > 0)
          list.push_back({i, static_cast<float>(overlap / scale)});
      }
    } else {
      // Bilinear between the two nearest input centers.
      double x = std::clamp((o + 0.5) * scale - 0.5, 0.0, double(in - 1));
      int64_t i0 = static_cast<int64_t>(std::floor(x));
      int64_t i1 = std::min(i0 + 1, in - 1);
      float fraction = static_cast<float>(x - double(i0));
      list.push_back({i0, 1.0f - fraction});
      if (fraction > 0)
        list.push_back({i1, fraction});
    }
  }
  return taps;
}

} // namespace

Image resizeImage(const Image &image, int64_t width, int64_t height) {
  int64_t channels = image.channels;
  // Rows first (width), then columns (height).
  std::vector<std::vector<Tap>> across = resizeTaps(image.width, width);
  std::vector<float> wide(static_cast<size_t>(image.height * width * channels),
                          0.0f);
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (const Tap &tap : across[static_cast<size_t>(x)])
        for (int64_t c = 0; c < channels; ++c)
          wide[static_cast<size_t>((y * width + x) * channels + c)] +=
              tap.weight * image.at(y, tap.index, c);

  std::vector<std::vector<Tap>> down = resizeTaps(image.height, height);
  Image resized;
  resized.width = width;
  resized.height = height;
  resized.channels = channels;
  resized.pixels.assign(static_cast<size_t>(height * width * channels), 0.0f);
  for (int64_t y = 0; y < height; ++y)
    for (const Tap &tap : down[static_cast<size_t>(y)])
      for (int64_t x = 0; x < width * channels; ++x)
        resized.pixels[static_cast<size_t>(y * width * channels + x)] +=
            tap.weight * wide[static_cast<size_t>(tap.index * width * channels + x)];
  return resized;
}

} // namespace sd::data
