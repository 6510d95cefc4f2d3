#pragma once
// What `hotloop pack --max-side N` does to one image: decoded, resized so its
// longer side is N (antialiased bilinear, as the loader and PIL resize), and
// written as a JPEG. An image already that small keeps its bytes, and so does
// one that does not decode (the loader skips it as it would have; `pack
// --verify` names it).

#include <cstdint>
#include <string>
#include <vector>

namespace hotloop::data {

struct PackImageOptions {
  int max_side = 0; // 0: every image keeps its bytes
  int quality = 90; // the JPEG quality of a resized image
};

struct PackedImage {
  std::vector<std::uint8_t> bytes;
  std::string extension; // as the source's ("jpg", "png"), "jpg" if resized
  bool resized = false;
};

struct PackedSize {
  int height = 0;
  int width = 0;
};
// An h x w image's size with its longer side `max_side` and the other in
// proportion (rounded, at least 1); the same size if it is no larger.
PackedSize packed_size(int height, int width, int max_side);

// `bytes` (the file `name`, whose lowercased extension is `extension`) as
// `o` packs it.
PackedImage pack_image(
    std::vector<std::uint8_t> bytes,
    const std::string& name,
    std::string extension,
    const PackImageOptions& o);

} // namespace hotloop::data
