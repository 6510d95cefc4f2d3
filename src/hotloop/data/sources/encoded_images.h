#pragma once
// A data set whose items are encoded image files (folders, WebDataset shards)
// also hands the loader an item's bytes instead of its decoded image, so that
// the loader decodes only what the item's crop needs (crop_decode.h). The
// loader asks for it with dynamic_cast; other data sets are decoded by their
// own get().

#include <cstdint>
#include <string>
#include <vector>

#include "hotloop/data/decode/image_decode.h"

namespace hotloop::data {

struct EncodedSample {
  std::vector<std::uint8_t> bytes; // the file as stored
  std::string name; // the file, or shard:key, for errors
  std::int64_t label = 0;
};

class EncodedImages {
 public:
  virtual ~EncodedImages() = default;
  // Item `index`'s bytes and label; DataError naming the file if it cannot be
  // read. Thread-safe.
  virtual EncodedSample encoded(std::size_t index) const = 0;
  // What get() decodes to (1 or 3 channels) and the largest image it takes:
  // the loader's own decode of encoded() keeps to the same.
  virtual DecodeOptions decode_options() const = 0;
};

} // namespace hotloop::data
