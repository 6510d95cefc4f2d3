#pragma once
// Writes small JPEG and PNG files for data tests, with the same libraries
// hotloop decodes with.

#include <png.h>
#include <turbojpeg.h>

// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
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

// How jpeg_file writes a JPEG: what libjpeg's compressor can vary.
struct JpegWriteOptions {
  int quality = 90;
  bool subsample_420 = true; // chroma at half size both ways (else 4:4:4)
  bool progressive = false;
  int restart_rows = 0; // a restart marker every this many MCU rows
  int restart_interval = 0; // or every this many MCUs (0: restart_rows)
  bool cmyk = false; // C = 4 pixels, stored as Adobe YCCK (inverted CMYK)
  bool optimize_coding = false; // Huffman tables fitted to the image
};

// JPEG bytes of (H, W, C) pixels, C = 1, 3 or 4 (CMYK, with options.cmyk),
// through libjpeg's compressor (progressive, restart markers and CMYK, which
// TurboJPEG 2.x cannot all write).
inline std::vector<std::uint8_t> jpeg_file(
    const std::vector<std::uint8_t>& px,
    int h,
    int w,
    int c,
    const JpegWriteOptions& o = {}) {
  jpeg_compress_struct ci{};
  jpeg_error_mgr err{};
  ci.err = jpeg_std_error(&err);
  jpeg_create_compress(&ci);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&ci, &out, &size);
  ci.image_width = static_cast<JDIMENSION>(w);
  ci.image_height = static_cast<JDIMENSION>(h);
  ci.input_components = c;
  ci.in_color_space = c == 1 ? JCS_GRAYSCALE : c == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&ci);
  if (c == 4) {
    jpeg_set_colorspace(&ci, JCS_YCCK);
    ci.write_Adobe_marker = TRUE;
  }
  jpeg_set_quality(&ci, o.quality, TRUE);
  if (c >= 3) {
    ci.comp_info[0].h_samp_factor = o.subsample_420 ? 2 : 1;
    ci.comp_info[0].v_samp_factor = o.subsample_420 ? 2 : 1;
  }
  if (o.progressive) {
    jpeg_simple_progression(&ci);
  }
  ci.optimize_coding = o.optimize_coding ? TRUE : FALSE;
  ci.restart_in_rows = o.restart_rows;
  ci.restart_interval = static_cast<unsigned int>(o.restart_interval);
  jpeg_start_compress(&ci, TRUE);
  const std::size_t stride = static_cast<std::size_t>(w) * c;
  while (ci.next_scanline < ci.image_height) {
    auto* row = const_cast<JSAMPROW>(px.data() + stride * ci.next_scanline);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  std::vector<std::uint8_t> bytes(out, out + size);
  std::free(out);
  return bytes;
}

// (H, W, C) pixels with the texture of a photo: smooth color fields, edges
// and fine grain, the same for the same seed (a JPEG of it has a photo's
// size and its blocks' detail).
inline std::vector<std::uint8_t> textured_image(
    int h,
    int w,
    int c,
    std::uint32_t seed) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(h) * w * c);
  std::uint32_t state = seed * 2654435761u + 1;
  const auto noise = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<double>(state >> 8) / 16777216.0 - 0.5;
  };
  double f[4][3];
  for (auto& ch : f) {
    for (double& v : ch) {
      v = 0.004 + (noise() + 0.5) * 0.06;
    }
  }
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool edge = ((x / 37 + y / 23) % 3) == 0;
      for (int k = 0; k < c; ++k) {
        double v = 128 +
            70 * std::sin(f[k][0] * x + f[k][1] * y) *
                std::cos(f[k][2] * (x - y)) +
            (edge ? 35 : -10) + 24 * noise();
        px[(static_cast<std::size_t>(y) * w + x) * c + k] =
            static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return px;
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
