#pragma once
// JPEG (TurboJPEG) and PNG (libpng) decoding to 8-bit pixels, for the folder
// and WebDataset sources. Gray, RGB and RGBA inputs decode to the channel count
// asked for: 3 replicates gray and drops alpha (as PIL's convert("RGB") does,
// so results match a torchvision pipeline), 1 gives luminance. No LibTorch
// here (image_tensor.h makes a tensor of the pixels), so the fuzz targets
// build without it.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hotloop/data/image_limit.h"
#include "hotloop/errors.h"

namespace hotloop::data {

enum class ImageFormat { Jpeg, Png, Unknown };

// The error for an image file that cannot be decoded: "NAME: WHAT", with the
// hint every decoder gives (replace or delete it; bad samples are skipped).
DataError bad_image(const std::string& name, const std::string& what);

// Throws DataError naming `name` for a size that is not positive, or of more
// than `max_pixels` (the error says how to raise it).
void check_image_size(
    const std::string& name,
    int width,
    int height,
    std::int64_t max_pixels);

// By the file's magic bytes, not its name.
ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes);

struct DecodedImage {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels; // (H, W, C) interleaved
};

struct DecodeOptions {
  int channels = 3; // 1 or 3
  // Larger images are refused, not allocated (image_limit.h).
  std::int64_t max_pixels = kDefaultMaxImagePixels;
};

// Throws DataError naming `name` for an empty, truncated, corrupt, oversized or
// unsupported file. Thread-safe (each thread keeps its own TurboJPEG handle).
DecodedImage decode_image(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const DecodeOptions& options = {});

} // namespace hotloop::data
