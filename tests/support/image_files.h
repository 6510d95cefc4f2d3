#pragma once
// Writes small JPEG and PNG files for data tests, with the same libraries
// hotloop decodes with.

#include <png.h>
#include <turbojpeg.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "support/temp_dir.h"

namespace hotloop::test {

// A (H, W, C) image whose every pixel is `color` (C values).
inline std::vector<std::uint8_t> flat_image(
    int h,
    int w,
    const std::vector<std::uint8_t>& color) {
  std::vector<std::uint8_t> px;
  px.reserve(static_cast<std::size_t>(h) * w * color.size());
  for (int i = 0; i < h * w; ++i) {
    px.insert(px.end(), color.begin(), color.end());
  }
  return px;
}

// JPEG bytes of (H, W, C) pixels, C = 1 (gray) or 3 (RGB).
inline std::vector<std::uint8_t> jpeg_bytes(
    const std::vector<std::uint8_t>& px,
    int h,
    int w,
    int c,
    int quality = 95) {
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(
      tj,
      px.data(),
      w,
      0,
      h,
      c == 1 ? TJPF_GRAY : TJPF_RGB,
      &out,
      &size,
      c == 1 ? TJSAMP_GRAY : TJSAMP_444,
      quality,
      0);
  if (rc != 0) {
    tjDestroy(tj);
    throw std::runtime_error("tjCompress2 failed");
  }
  std::vector<std::uint8_t> bytes(out, out + size);
  tjFree(out);
  tjDestroy(tj);
  return bytes;
}

// PNG bytes of (H, W, C) pixels, C = 1 (gray), 2 (gray+alpha), 3 (RGB) or 4
// (RGBA).
inline std::vector<std::uint8_t> png_bytes(
    const std::vector<std::uint8_t>& px,
    int h,
    int w,
    int c) {
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = c == 1 ? PNG_FORMAT_GRAY
      : c == 2        ? PNG_FORMAT_GA
      : c == 3        ? PNG_FORMAT_RGB
                      : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr);
  std::vector<std::uint8_t> bytes(size);
  if (png_image_write_to_memory(
          &img, bytes.data(), &size, 0, px.data(), 0, nullptr) == 0) {
    throw std::runtime_error("png_image_write_to_memory failed");
  }
  bytes.resize(size);
  return bytes;
}

} // namespace hotloop::test
