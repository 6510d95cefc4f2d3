#pragma once
// What `hotloop pack` does to one image. With `--max-side N`: decoded,
// resized so its longer side is N (antialiased bilinear, as the loader and
// PIL resize), and written as a JPEG. A JPEG kept at its size is rewritten
// losslessly (the same pixels) with a restart marker per row of blocks, so
// the loader's crops skip the rows above them (image_encode.h); resized ones
// are written so too. Other images, and files that do not decode (the
// loader skips them as it would have; `pack --verify` names them), keep
// their bytes.

#include <cstdint>
#include <string>
#include <vector>

namespace hotloop::data {

struct PackImageOptions {
  int max_side = 0; // 0: every image keeps its bytes
  int quality = 90; // the JPEG quality of a resized image
  bool restart_markers = true; // false: kept files keep their bytes
};

struct PackedImage {
  std::vector<std::uint8_t> bytes;
  std::string extension; // as the source's ("jpg", "png"), "jpg" if resized
  bool resized = false;
  bool remarked = false; // kept at its size, rewritten with restart markers
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
