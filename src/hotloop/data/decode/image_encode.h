#pragma once
// Writing JPEGs (libjpeg-turbo's libjpeg API) as `hotloop pack` stores them:
// with a restart marker at the start of each row of MCUs, so a crop's decode
// can start at the row above it instead of Huffman-decoding every row from
// the top (jpeg_restart_cut.h), and Huffman tables fitted to the image. No
// LibTorch here.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hotloop/data/image_limit.h"

namespace hotloop::data {

// Encodes (height, width, channels) interleaved pixels, channels 1 or 3, as a
// baseline JPEG at `quality` (1 to 100), color at 4:2:0 with the accurate DCT
// (what PIL's save does by default), Huffman tables fitted to the image and,
// with `restart_rows`, a restart marker per MCU row. Throws UsageError for
// other channel counts or qualities, DataError if libjpeg fails.
// Thread-safe.
std::vector<std::uint8_t> encode_jpeg(
    const std::uint8_t* pixels,
    int height,
    int width,
    int channels,
    int quality,
    bool restart_rows = true);

// `bytes` rewritten losslessly (the same DCT coefficients, so the same
// pixels) as a baseline JPEG with a restart marker per MCU row; progressive
// and arithmetic-coded files become baseline. The APPn and COM segments
// (EXIF, ICC profiles) are kept. None for anything libjpeg cannot rewrite
// that way: not a JPEG, 12-bit samples, corrupt or truncated data, more
// than `max_pixels` (the caller keeps such a file as it is). Thread-safe.
std::optional<std::vector<std::uint8_t>> with_row_restarts(
    std::span<const std::uint8_t> bytes,
    std::int64_t max_pixels = kDefaultMaxImagePixels);

} // namespace hotloop::data
