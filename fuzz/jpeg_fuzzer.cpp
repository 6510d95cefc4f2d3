// libFuzzer target for the JPEG decoders (data/decode/): the whole-image
// decode (TurboJPEG; CMYK and YCCK through libjpeg) and the region and
// DCT-scaled decode the training crops use (libjpeg under setjmp/longjmp,
// into hotloop's own buffer; from a restart marker below the top where the
// file has them), the header read that routes a file for --decode-device
// gpu, and pack's lossless rewrite with restart markers. Any bytes must decode
// or give a DataError, never a crash, an out-of-bounds access or a huge
// allocation; what decodes has the size the header says, and a region lies
// inside the scaled image and inside the buffer. Built and run by fuzz/run,
// seeded with fuzz/seeds/jpeg (baseline, progressive, restart markers, 4:4:4,
// 4:2:0, gray, CMYK, arithmetic-coded).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "decoded_image.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/image_encode.h"
#include "hotloop/data/decode/jpeg_region.h"
#include "hotloop/errors.h"

namespace {

using hotloop::data::JpegInfo;
using hotloop::data::JpegRegionRequest;

// Small images only: the limit is what is fuzzed, not the allocator.
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 20;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

// The request a training crop could make, chosen by `seed`: a scale, a
// rectangle inside the scaled image (or outside it, which must be refused).
JpegRegionRequest request(const JpegInfo& info, std::uint32_t seed) {
  JpegRegionRequest r;
  r.scale_eighths = 1 + static_cast<int>(seed % 8);
  r.channels = (seed >> 3) % 4 == 0 ? 1 : 3;
  const int sw = hotloop::data::scaled_size(info.width, r.scale_eighths);
  const int sh = hotloop::data::scaled_size(info.height, r.scale_eighths);
  if ((seed >> 5) % 8 == 0) {
    return r; // the whole image
  }
  r.rect.x = static_cast<int>((seed >> 8) % static_cast<std::uint32_t>(sw));
  r.rect.y = static_cast<int>((seed >> 16) % static_cast<std::uint32_t>(sh));
  r.rect.w = 1 +
      static_cast<int>(
                 (seed >> 12) % static_cast<std::uint32_t>(sw - r.rect.x));
  r.rect.h = 1 +
      static_cast<int>(
                 (seed >> 20) % static_cast<std::uint32_t>(sh - r.rect.y));
  if ((seed >> 28) == 0) {
    r.rect.w = sw - r.rect.x + 1; // one column too many
  }
  return r;
}

void full_decode(std::span<const std::uint8_t> bytes, int channels) {
  try {
    const auto img =
        hotloop::data::decode_image(bytes, "fuzz.jpg", {channels, kMaxPixels});
    fuzz::check_decoded(img, channels, kMaxPixels);
  } catch (const hotloop::DataError&) {
  }
}

void region_decode(std::span<const std::uint8_t> bytes, std::uint32_t seed) {
  std::vector<std::uint8_t> buffer;
  JpegRegionRequest asked;
  int width = 0;
  int height = 0;
  try {
    const auto r = hotloop::data::decode_jpeg_region(
        bytes,
        "fuzz.jpg",
        [&](const JpegInfo& info) {
          check(std::int64_t{info.width} * info.height <= kMaxPixels);
          width = info.width;
          height = info.height;
          asked = request(info, seed);
          return asked;
        },
        buffer,
        kMaxPixels);
    const int sw = hotloop::data::scaled_size(width, asked.scale_eighths);
    const int sh = hotloop::data::scaled_size(height, asked.scale_eighths);
    check(r.scaled_width == sw && r.scaled_height == sh);
    check(r.channels == asked.channels);
    check(r.rect.x >= 0 && r.rect.w > 0 && r.rect.x + r.rect.w <= sw);
    check(r.rect.y >= 0 && r.rect.h > 0 && r.rect.y + r.rect.h <= sh);
    if (asked.rect.w > 0) { // the request's rows, at least its columns
      check(r.rect.y == asked.rect.y && r.rect.h == asked.rect.h);
      check(r.rect.x <= asked.rect.x);
      check(r.rect.x + r.rect.w >= asked.rect.x + asked.rect.w);
    }
    check(r.row_bytes >= static_cast<std::size_t>(r.rect.w) * r.channels);
    check(r.pixels == buffer.data());
    check(r.row_bytes * static_cast<std::size_t>(r.rect.h) <= buffer.size());
    unsigned sum = 0; // every pixel it says it wrote can be read
    for (int y = 0; y < r.rect.h; ++y) {
      for (std::size_t x = 0;
           x < static_cast<std::size_t>(r.rect.w) * r.channels;
           ++x) {
        sum += r.pixels[static_cast<std::size_t>(y) * r.row_bytes + x];
      }
    }
    (void)sum;
  } catch (const hotloop::DataError&) {
  } catch (const hotloop::UsageError&) {
    // Only a request outside the image may be refused as usage.
    check(
        asked.rect.w > 0 &&
        asked.rect.x + asked.rect.w >
            hotloop::data::scaled_size(width, asked.scale_eighths));
  }
}

// `hotloop pack`'s lossless rewrite with restart markers: a JPEG or none,
// and where the input decodes, the rewrite decodes to the same pixels.
void rewrite(std::span<const std::uint8_t> bytes) {
  const auto marked = hotloop::data::with_row_restarts(bytes, kMaxPixels);
  if (!marked) {
    return;
  }
  std::vector<std::uint8_t> original;
  try {
    original =
        hotloop::data::decode_image(bytes, "fuzz.jpg", {3, kMaxPixels}).pixels;
  } catch (const hotloop::DataError&) {
    return;
  }
  try {
    check(
        hotloop::data::decode_image(*marked, "marked.jpg", {3, kMaxPixels})
            .pixels == original);
  } catch (const hotloop::DataError&) {
    check(false); // what decoded before must decode after
  }
}

// The header alone: within the limit, and what it says is what a decode
// can act on (the GPU's routing reads these fields).
void header_read(std::span<const std::uint8_t> bytes) {
  try {
    const JpegInfo info =
        hotloop::data::read_jpeg_info(bytes, "fuzz.jpg", kMaxPixels);
    check(info.width > 0 && info.height > 0);
    check(std::int64_t{info.width} * info.height <= kMaxPixels);
    check(info.components >= 1 && info.components <= 10); // libjpeg's limit
    check(info.subsampling_x >= 1 && info.subsampling_y >= 1);
  } catch (const hotloop::DataError&) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  // The request's parameters from the bytes themselves (FNV-1a), so that
  // every seed is a plain JPEG file.
  std::uint32_t seed = 2166136261u;
  for (const std::uint8_t b : bytes) {
    seed = (seed ^ b) * 16777619u;
  }
  full_decode(bytes, (seed & 1) != 0 ? 1 : 3);
  region_decode(bytes, seed >> 1);
  header_read(bytes);
  rewrite(bytes);
  return 0;
}
