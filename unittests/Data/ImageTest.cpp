//===- ImageTest.cpp - Tests for image decoding, cropping and resizing ----===//

#include "DataTestUtils.h"

#include "sd/Data/Image.h"

#include "gmock/gmock.h"

#include <zlib.h>

#include <cmath>

using namespace sd::data;
using namespace sd::data::testing;
using ::testing::HasSubstr;

namespace {

/// A 16-bit grayscale PNG without a gAMA chunk (what most tools write),
/// through libpng's full API.
std::string encodeGray16Png(int width, int height,
                            const std::vector<uint16_t> &values) {
  std::string bytes;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr,
                                            nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(
      png, &bytes,
      [](png_structp png, png_bytep data, size_t size) {
        static_cast<std::string *>(png_get_io_ptr(png))
            ->append(reinterpret_cast<char *>(data), size);
      },
      nullptr);
  png_set_IHDR(png, info, width, height, 16, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) {
    std::vector<uint8_t> row;
    for (int x = 0; x < width; ++x) {
      uint16_t value = values[y * width + x];
      row.push_back(static_cast<uint8_t>(value >> 8));
      row.push_back(static_cast<uint8_t>(value & 0xff));
    }
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return bytes;
}

/// An image from explicit values (for crop and resize).
Image makeImage(int64_t width, int64_t height, std::vector<float> pixels) {
  return Image{width, height, 1, std::move(pixels)};
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

TEST(ImageTest, PngRgbToThreeAndOneChannels) {
  std::vector<uint8_t> pixels = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
  std::string png = encodePng(2, 2, PNG_FORMAT_RGB, pixels.data());
  absl::StatusOr<Image> rgb = decodeImage(png, "a.png", 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->width, 2);
  EXPECT_EQ(rgb->height, 2);
  EXPECT_EQ(rgb->channels, 3);
  EXPECT_EQ(rgb->pixels, std::vector<float>(pixels.begin(), pixels.end()));
  absl::StatusOr<Image> gray = decodeImage(png, "a.png", 1);
  ASSERT_TRUE(gray.ok());
  ASSERT_EQ(gray->pixels.size(), 4u);
  EXPECT_FLOAT_EQ(gray->pixels[0], 0.299f * 255);
  EXPECT_FLOAT_EQ(gray->pixels[1], 0.587f * 255);
  EXPECT_FLOAT_EQ(gray->pixels[2], 0.114f * 255);
  EXPECT_NEAR(gray->pixels[3], 0.299 * 10 + 0.587 * 20 + 0.114 * 30, 1e-4);
}

TEST(ImageTest, PngGrayBecomesThreeEqualChannels) {
  std::vector<uint8_t> pixels = {0, 100, 200};
  std::string png = encodePng(3, 1, PNG_FORMAT_GRAY, pixels.data());
  absl::StatusOr<Image> rgb = decodeImage(png, "g.png", 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->pixels,
            (std::vector<float>{0, 0, 0, 100, 100, 100, 200, 200, 200}));
  absl::StatusOr<Image> gray = decodeImage(png, "g.png", 1);
  ASSERT_TRUE(gray.ok());
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(gray->pixels[i], pixels[i], 1e-3);
}

TEST(ImageTest, PngAlphaIsCompositedOverWhite) {
  // Opaque red, transparent black, half-transparent blue.
  std::vector<uint8_t> pixels = {255, 0, 0, 255, 0, 0, 0, 0, 0, 0, 255, 128};
  std::string png = encodePng(3, 1, PNG_FORMAT_RGBA, pixels.data());
  absl::StatusOr<Image> image = decodeImage(png, "a.png", 3);
  ASSERT_TRUE(image.ok()) << image.status();
  float a = 128 / 255.0f;
  std::vector<float> expected = {255, 0,   0,   255, 255,
                                 255, 255 * (1 - a), 255 * (1 - a), 255};
  ASSERT_EQ(image->pixels.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(image->pixels[i], expected[i], 1e-3) << i;
}

TEST(ImageTest, PngPaletteAnd16Bit) {
  std::vector<uint8_t> palette = {0, 0, 0, 200, 100, 50};
  std::vector<uint8_t> indices = {1, 0, 0, 1};
  std::string png = encodePng(2, 2, PNG_FORMAT_RGB_COLORMAP, indices.data(),
                              palette.data(), 2);
  absl::StatusOr<Image> image = decodeImage(png, "p.png", 3);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->pixels,
            (std::vector<float>{200, 100, 50, 0, 0, 0, 0, 0, 0, 200, 100, 50}));

  // 16-bit samples are scaled to 8 bits, not gamma-encoded.
  std::string deep = encodeGray16Png(3, 1, {0, 257 * 128, 65535});
  absl::StatusOr<Image> gray = decodeImage(deep, "d.png", 3);
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_EQ(gray->pixels,
            (std::vector<float>{0, 0, 0, 128, 128, 128, 255, 255, 255}));
}

TEST(ImageTest, JpegRgbGrayAndCmyk) {
  // Flat colors survive JPEG at quality 100 within a level or two.
  std::vector<uint8_t> rgbPixels;
  for (int i = 0; i < 16 * 16; ++i)
    rgbPixels.insert(rgbPixels.end(), {200, 40, 90});
  std::string jpeg = encodeJpeg(16, 16, 3, rgbPixels);
  absl::StatusOr<Image> rgb = decodeImage(jpeg, "c.jpg", 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->width, 16);
  EXPECT_EQ(rgb->height, 16);
  EXPECT_NEAR(rgb->at(5, 7, 0), 200, 2);
  EXPECT_NEAR(rgb->at(5, 7, 1), 40, 2);
  EXPECT_NEAR(rgb->at(5, 7, 2), 90, 2);

  std::string grayJpeg = encodeJpeg(8, 8, 1, std::vector<uint8_t>(64, 77));
  absl::StatusOr<Image> gray = decodeImage(grayJpeg, "g.jpg", 3);
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_NEAR(gray->at(3, 3, 0), 77, 1);
  EXPECT_EQ(gray->at(3, 3, 0), gray->at(3, 3, 2));

  std::string cmyk = encodeJpeg(8, 8, 4, std::vector<uint8_t>(256, 10));
  absl::StatusOr<Image> refused = decodeImage(cmyk, "k.jpg", 3);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_EQ(refused.status().message(),
            "'k.jpg' is not a valid JPEG image: CMYK JPEGs are not supported "
            "(only grayscale and RGB)");
}

TEST(ImageTest, CorruptFilesNameTheFile) {
  std::string png = solidPng(8, 8, 1, 2, 3);
  absl::StatusOr<Image> truncated =
      decodeImage(png.substr(0, png.size() - 20), "t.png", 3);
  EXPECT_TRUE(absl::IsInvalidArgument(truncated.status()));
  EXPECT_THAT(truncated.status().message(),
              HasSubstr("'t.png' is not a valid PNG image: "));

  std::vector<uint8_t> pixels(32 * 32 * 3, 128);
  std::string jpeg = encodeJpeg(32, 32, 3, pixels);
  absl::StatusOr<Image> cut =
      decodeImage(jpeg.substr(0, jpeg.size() / 2), "t.jpg", 3);
  EXPECT_TRUE(absl::IsInvalidArgument(cut.status()));
  EXPECT_THAT(cut.status().message(),
              HasSubstr("'t.jpg' is not a valid JPEG image: "));
  // A JPEG signature and nothing after it.
  EXPECT_THAT(decodeImage("\xff\xd8\xff", "s.jpg", 3).status().message(),
              HasSubstr("'s.jpg' is not a valid JPEG image: "));

  absl::StatusOr<Image> text = decodeImage("hello", "h.png", 3);
  EXPECT_EQ(text.status().message(), "'h.png' is neither a PNG nor a JPEG image");
  EXPECT_EQ(decodeImage(png, "x.png", 2).status().message(),
            "2 channels; images have 1 or 3");

  absl::StatusOr<Image> missing = readImage("/nonexistent/x.png", 3);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/x.png"));
}

/// A valid 1×1 PNG whose header then claims `width` × `height` pixels
/// (with the header's CRC fixed, so libpng accepts it).
std::string pngClaiming(uint32_t width, uint32_t height) {
  std::string png = solidPng(1, 1, 0, 0, 0);
  for (auto [offset, size] : {std::pair{16, width}, {20, height}})
    for (int i = 0; i < 4; ++i)
      png[offset + i] = static_cast<char>(size >> (24 - 8 * i));
  uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef *>(png.data() + 12), 17));
  for (int i = 0; i < 4; ++i)
    png[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  return png;
}

TEST(ImageTest, HugeDimensionsAreRefusedBeforeDecoding) {
  EXPECT_EQ(
      decodeImage(pngClaiming(100000, 100000), "big.png", 3).status().message(),
      "'big.png' is 100000x100000 pixels of 3 channels; sd decodes "
      "images of at most 268435456 values");
  // The limit counts the channels asked for: 9500 × 9500 × 3 is above it.
  EXPECT_EQ(
      decodeImage(pngClaiming(9500, 9500), "rgb.png", 3).status().message(),
      "'rgb.png' is 9500x9500 pixels of 3 channels; sd decodes images of at "
      "most 268435456 values");
  EXPECT_EQ(
      decodeImage(pngClaiming(20000, 20000), "gray.png", 1).status().message(),
      "'gray.png' is 20000x20000 pixels of 1 channel; sd decodes images "
      "of at most 268435456 values");
}

TEST(ImageTest, HugeJpegIsRefusedBeforeDecoding) {
  // The frame header (SOF0: FF C0, length, precision, height, width) of a
  // small JPEG patched to claim 60000 × 60000 pixels (0xea60; libjpeg's
  // own limit is 65500).
  std::string jpeg = encodeJpeg(8, 8, 3, std::vector<uint8_t>(192, 50));
  size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t i = sof + 5; i < sof + 9; i += 2) {
    jpeg[i] = '\xea';
    jpeg[i + 1] = '\x60';
  }
  EXPECT_EQ(std::string(decodeImage(jpeg, "big.jpg", 3).status().message()),
            "'big.jpg' is 60000x60000 pixels of 3 channels; sd decodes images "
            "of at most 268435456 values");
}

//===----------------------------------------------------------------------===//
// Crop and resize
//===----------------------------------------------------------------------===//

TEST(ImageTest, CenterCrop) {
  // 4 wide, 2 high: the middle two columns.
  Image wide = centerCrop(makeImage(4, 2, {0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(wide.width, 2);
  EXPECT_EQ(wide.height, 2);
  EXPECT_EQ(wide.pixels, (std::vector<float>{1, 2, 5, 6}));
  // 2 wide, 5 high: rows 1 and 2 (the odd extra row is cut at the bottom).
  Image tall = centerCrop(makeImage(2, 5, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(tall.pixels, (std::vector<float>{2, 3, 4, 5}));
}

TEST(ImageTest, ResizeAreaWhenShrinking) {
  Image half = resizeImage(makeImage(4, 1, {0, 2, 4, 8}), 2, 1);
  EXPECT_EQ(half.pixels, (std::vector<float>{1, 6}));
  // 3 → 2: each output covers 1.5 input pixels.
  Image uneven = resizeImage(makeImage(3, 1, {3, 6, 9}), 2, 1);
  ASSERT_EQ(uneven.pixels.size(), 2u);
  EXPECT_FLOAT_EQ(uneven.pixels[0], (3 * 1 + 6 * 0.5f) / 1.5f);
  EXPECT_FLOAT_EQ(uneven.pixels[1], (6 * 0.5f + 9 * 1) / 1.5f);
  // Both axes: the mean of each 2×2 block.
  Image square = resizeImage(
      makeImage(4, 4, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 8, 3, 3, 4, 8}), 2, 2);
  EXPECT_EQ(square.pixels, (std::vector<float>{1, 2, 3, 6}));
}

TEST(ImageTest, ResizeBilinearWhenGrowing) {
  Image doubled = resizeImage(makeImage(2, 1, {0, 8}), 4, 1);
  EXPECT_EQ(doubled.pixels, (std::vector<float>{0, 2, 6, 8}));
  Image same = resizeImage(makeImage(2, 2, {1, 2, 3, 4}), 2, 2);
  EXPECT_EQ(same.pixels, (std::vector<float>{1, 2, 3, 4}));
  // A flat RGB image stays flat, whatever the factor.
  Image flat{3, 2, 3, std::vector<float>(18, 42)};
  for (auto [w, h] : {std::pair{7, 5}, {1, 1}, {2, 9}}) {
    Image resized = resizeImage(flat, w, h);
    EXPECT_EQ(resized.pixels.size(), static_cast<size_t>(w * h * 3));
    for (float value : resized.pixels)
      EXPECT_NEAR(value, 42, 1e-4);
  }
}

} // namespace
