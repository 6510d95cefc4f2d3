#pragma once
// JPEG encoding (TurboJPEG) of 8-bit pixels: what `hotloop pack --max-side`
// writes for an image it resized. No LibTorch here.

#include <cstdint>
#include <vector>

namespace hotloop::data {

// Encodes (height, width, channels) interleaved pixels, channels 1 or 3, as a
// baseline JPEG at `quality` (1 to 100), color at 4:2:0 with the accurate DCT
// (what PIL's save does by default). Throws UsageError for other channel
// counts or qualities, DataError if TurboJPEG fails. Thread-safe.
std::vector<std::uint8_t> encode_jpeg(
    const std::uint8_t* pixels,
    int height,
    int width,
    int channels,
    int quality);

} // namespace hotloop::data
