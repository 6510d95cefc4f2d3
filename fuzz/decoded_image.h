#pragma once
// What the JPEG and PNG targets check of every image that decodes.

#include <cstddef>
#include <cstdint>

#include "hotloop/data/decode/image_decode.h"

namespace fuzz {

// Traps unless `img` has a size inside `max_pixels`, the channels asked
// for, and exactly its pixels' bytes.
inline void check_decoded(
    const hotloop::data::DecodedImage& img,
    int channels,
    std::int64_t max_pixels) {
  const bool ok = img.width > 0 && img.height > 0 && img.channels == channels &&
      std::int64_t{img.width} * img.height <= max_pixels &&
      img.pixels.size() ==
          static_cast<std::size_t>(img.width) * img.height * channels;
  if (!ok) {
    __builtin_trap();
  }
}

} // namespace fuzz
