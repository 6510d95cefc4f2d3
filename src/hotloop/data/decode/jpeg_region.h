#pragma once
// Decoding one rectangle of a JPEG, optionally at a reduced scale, through
// libjpeg-turbo's libjpeg API (TurboJPEG 2.x has no region decode):
// - scale_num/8 scaling in the DCT domain (k/8 of the full size, k = 1..8);
// - jpeg_crop_scanline: only the columns from the iMCU column at or left of
//   the rectangle (16 px for 4:2:0, 8 for 4:4:4, at full scale) to its right
//   edge;
// - jpeg_skip_scanlines: the rows above it are not color-converted or
//   upsampled (for a baseline file, not even inverse-transformed);
// - the rows below it are never decoded (jpeg_abort_decompress).
// A progressive file's coefficients are all Huffman-decoded before the first
// row comes out (libjpeg must read every scan), so region decoding saves its
// inverse transforms, upsampling and color conversion only.
// CMYK and YCCK (Adobe) files are converted to RGB the way PIL's
// convert("RGB") does.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace hotloop::data {

// From the header alone.
struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0; // in the file: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  bool progressive = false;
  bool cmyk = false; // CMYK or YCCK
  bool arithmetic = false; // arithmetic-coded (else Huffman)
  int precision = 8; // bits per sample
  // Chroma subsampling, as luma's sampling factor over chroma's on each axis:
  // 1 x 1 for 4:4:4 (and gray), 2 x 2 for 4:2:0, 4 x 1 for 4:1:1.
  int subsampling_x = 1;
  int subsampling_y = 1;
};

// A rectangle in the pixels of an image at some scale.
struct PixelRect {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
};

struct JpegRegionRequest {
  int scale_eighths = 8; // decode at scale_eighths / 8 of the full size, 1..8
  PixelRect rect; // in the scaled image's pixels; w == 0: the whole image
  int channels = 3; // 1 or 3
};

struct JpegRegion {
  // What was decoded, in the scaled image's pixels: the request's rows, and
  // columns from the iMCU column at or left of its x to at least its right
  // edge.
  PixelRect rect;
  int scaled_width = 0; // the whole image at this scale
  int scaled_height = 0;
  int channels = 0;
  std::size_t row_bytes = 0;
  // (rect.h, rect.w, channels) interleaved rows, row_bytes apart, in the
  // caller's buffer.
  const std::uint8_t* pixels = nullptr;
};

// libjpeg's size of an image side at k/8: ceil(size * k / 8).
int scaled_size(int size, int scale_eighths);

// The header of `bytes` alone, checked as decode_jpeg_region checks it
// (DataError naming `name`: corrupt, truncated, over `max_pixels`).
JpegInfo read_jpeg_info(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    std::int64_t max_pixels);

// Reads the header of `bytes`, asks `plan` what to decode, and decodes that
// into `buffer` (grown as needed, reused across calls). Throws DataError
// naming `name` for a corrupt or truncated file (also one truncated below
// the rectangle: a file must end with its end-of-image marker), an image of
// more than `max_pixels`, or a request outside the image. Thread-safe (each
// thread keeps its own decompressor).
JpegRegion decode_jpeg_region(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const std::function<JpegRegionRequest(const JpegInfo&)>& plan,
    std::vector<std::uint8_t>& buffer,
    std::int64_t max_pixels);

} // namespace hotloop::data
