//===- DataTestUtils.h - Files for the dataset tests ------------*- C++ -*-===//
//
// Fresh directories, file helpers and tiny PNG/JPEG encoders (libpng's
// simplified writer, libjpeg) for the image decoding and image-folder tests.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_DATA_DATATESTUTILS_H
#define SD_UNITTESTS_DATA_DATATESTUTILS_H

#include "gtest/gtest.h"

#include <png.h>
// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sd::data::testing {

namespace fs = std::filesystem;

/// A fresh directory per test under the gtest temporary directory.
inline fs::path freshDir() {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(::testing::TempDir()) /
                 (std::string("sd_data_") + info->test_suite_name() + "_" +
                  info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void writeFile(const fs::path &path, const std::string &bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

/// A PNG of `format` (a PNG_FORMAT_* value; PNG_FORMAT_FLAG_LINEAR for 16-bit
/// samples, then `pixels` holds uint16_t values) from packed rows.
inline std::string encodePng(int width, int height, uint32_t format,
                             const void *pixels,
                             const void *colormap = nullptr,
                             int colormapEntries = 0) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = format;
  image.colormap_entries = colormapEntries;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_get_memory_size(image, size, 0, pixels, 0,
                                              colormap));
  std::string bytes(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&image, bytes.data(), &size, 0,
                                        pixels, 0, colormap))
      << image.message;
  bytes.resize(size);
  return bytes;
}

/// A baseline JPEG at quality 100 of 1 (gray), 3 (RGB) or 4 (CMYK) channels.
inline std::string encodeJpeg(int width, int height, int channels,
                              const std::vector<uint8_t> &pixels) {
  jpeg_compress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char *buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = width;
  info.image_height = height;
  info.input_components = channels;
  info.in_color_space =
      channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 100, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data()) +
                   info.next_scanline * width * channels;
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::string bytes(reinterpret_cast<char *>(buffer), size);
  std::free(buffer);
  return bytes;
}

/// A `width` × `height` image of one RGB color, as PNG.
inline std::string solidPng(int width, int height, uint8_t r, uint8_t g,
                            uint8_t b) {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < width * height; ++i)
    pixels.insert(pixels.end(), {r, g, b});
  return encodePng(width, height, PNG_FORMAT_RGB, pixels.data());
}

} // namespace sd::data::testing

#endif // SD_UNITTESTS_DATA_DATATESTUTILS_H
