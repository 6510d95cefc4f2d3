#pragma once
// How many pixels an image's header may claim before hotloop allocates them
// (--max-image-pixels). An image over the limit is a bad sample, refused
// before its pixels exist: a header claiming 60000 x 60000 over a small scan
// costs nothing.

#include <cstdint>

namespace hotloop::data {

// 16384 x 16384: above any photo data set's images.
inline constexpr std::int64_t kDefaultMaxImagePixels = std::int64_t{1} << 28;
// 65535 x 65535, the largest JPEG: what --max-image-pixels may raise it to.
inline constexpr std::int64_t kLargestMaxImagePixels = std::int64_t{1} << 32;

} // namespace hotloop::data
