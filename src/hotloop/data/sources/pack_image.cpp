#include "hotloop/data/sources/pack_image.h"

#include <algorithm>
#include <cmath>

#include "hotloop/data/augment.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/image_encode.h"
#include "hotloop/errors.h"

namespace hotloop::data {

PackedSize packed_size(int height, int width, int max_side) {
  const int longer = std::max(height, width);
  if (max_side <= 0 || longer <= max_side) {
    return {height, width};
  }
  const double scale = static_cast<double>(max_side) / longer;
  const auto side = [&](int n) {
    return std::max(1, static_cast<int>(std::lround(n * scale)));
  };
  return height >= width ? PackedSize{max_side, side(width)}
                         : PackedSize{side(height), max_side};
}

PackedImage pack_image(
    std::vector<std::uint8_t> bytes,
    const std::string& name,
    std::string extension,
    const PackImageOptions& o) {
  PackedImage kept{std::move(bytes), std::move(extension), false};
  const auto keep = [&] {
    if (o.restart_markers) {
      if (auto marked = with_row_restarts(kept.bytes)) {
        kept.bytes = std::move(*marked);
        kept.remarked = true;
      }
    }
    return std::move(kept);
  };
  if (o.max_side <= 0) {
    return keep();
  }
  DecodedImage image;
  try {
    image = decode_image(kept.bytes, name); // 3 channels, the default limit
  } catch (const DataError&) {
    return kept; // the loader refuses it as it would the original
  }
  const PackedSize size = packed_size(image.height, image.width, o.max_side);
  if (size.height == image.height && size.width == image.width) {
    return keep();
  }
  const std::size_t n = static_cast<std::size_t>(size.height) * size.width;
  std::vector<std::uint8_t> planar(3 * n);
  resize_box_into(
      {image.pixels.data(), image.height, image.width, 3, image.width * 3},
      CropBox{
          0,
          0,
          static_cast<double>(image.width),
          static_cast<double>(image.height),
          false},
      planar.data(),
      {size.height, size.width});
  std::vector<std::uint8_t> interleaved(3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t c = 0; c < 3; ++c) {
      interleaved[3 * i + c] = planar[c * n + i];
    }
  }
  return {
      encode_jpeg(
          interleaved.data(),
          size.height,
          size.width,
          3,
          o.quality,
          o.restart_markers),
      "jpg",
      true};
}

} // namespace hotloop::data
