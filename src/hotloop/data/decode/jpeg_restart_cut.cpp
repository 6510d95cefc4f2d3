#include "hotloop/data/decode/jpeg_restart_cut.h"

#include <cstring>
#include <numeric>

namespace hotloop::data {
namespace {

constexpr std::uint8_t kSos = 0xDA;
constexpr std::uint8_t kRst0 = 0xD0;

std::size_t be16(std::span<const std::uint8_t> b, std::size_t at) {
  return static_cast<std::size_t>(b[at]) << 8 | b[at + 1];
}

// The offset of the height in the frame header of a baseline or extended
// Huffman-coded file (SOF0 or SOF1), walking the segments before the first
// scan; none for another frame type or a header that does not parse.
std::optional<std::size_t> frame_height_at(
    std::span<const std::uint8_t> b,
    std::size_t scan_start) {
  std::optional<std::size_t> height_at;
  std::size_t p = 2; // after the start-of-image marker
  while (p < scan_start) {
    if (b[p] != 0xFF) {
      return std::nullopt;
    }
    while (p < scan_start && b[p] == 0xFF) { // fill bytes before a marker
      ++p;
    }
    if (p + 3 > scan_start) {
      return std::nullopt;
    }
    const std::uint8_t marker = b[p];
    if (marker == kSos) {
      return height_at;
    }
    const std::size_t length = be16(b, p + 1);
    if (length < 2 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) {
      return std::nullopt; // markers without a segment do not belong here
    }
    if (marker == 0xC0 || marker == 0xC1) {
      if (length < 8 || height_at) {
        return std::nullopt;
      }
      height_at = p + 4; // code, length (2), precision, then the height
    } else if (
        marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
        marker != 0xCC) {
      return std::nullopt; // progressive, lossless or arithmetic-coded
    }
    p += 1 + length;
  }
  return std::nullopt;
}

// The offset just after the n-th restart marker of the entropy-coded data
// from `p` on, or none when another marker comes first or the markers are
// out of their order (0 to 7, again and again).
std::optional<std::size_t> after_restart_marker(
    std::span<const std::uint8_t> b,
    std::size_t p,
    std::int64_t n) {
  std::int64_t found = 0;
  while (found < n) {
    const void* ff = std::memchr(b.data() + p, 0xFF, b.size() - p);
    if (ff == nullptr) {
      return std::nullopt;
    }
    std::size_t q = static_cast<std::size_t>(
        static_cast<const std::uint8_t*>(ff) - b.data() + 1);
    while (q < b.size() && b[q] == 0xFF) {
      ++q;
    }
    if (q >= b.size()) {
      return std::nullopt;
    }
    const std::uint8_t code = b[q];
    if (code != 0x00) { // 0xFF 0x00 is a stuffed data byte
      if (code < kRst0 || code > kRst0 + 7 || code - kRst0 != found % 8) {
        return std::nullopt;
      }
      ++found;
    }
    p = q + 1;
  }
  return p;
}

} // namespace

std::optional<RestartCut> find_restart_cut(
    std::span<const std::uint8_t> bytes,
    std::size_t scan_start,
    const ScanLayout& layout,
    int mcu_row) {
  const ScanLayout& l = layout;
  if (l.restart_interval <= 0 || mcu_row <= 0 || l.mcu_width <= 0 ||
      l.mcu_height <= 0 || l.width <= 0 || l.height <= 0 ||
      scan_start > bytes.size() || bytes.size() < 4) {
    return std::nullopt;
  }
  const std::int64_t per_row = (l.width + l.mcu_width - 1) / l.mcu_width;
  const std::int64_t rows = (l.height + l.mcu_height - 1) / l.mcu_height;
  // Rows that start at a marker: every g-th, g = interval / gcd.
  const std::int64_t every =
      l.restart_interval / std::gcd(per_row, std::int64_t{l.restart_interval});
  const std::int64_t row = mcu_row - mcu_row % every;
  if (row <= 0 || row >= rows) {
    return std::nullopt;
  }
  const std::optional<std::size_t> height_at =
      frame_height_at(bytes, scan_start);
  if (!height_at ||
      be16(bytes, *height_at) != static_cast<std::size_t>(l.height)) {
    return std::nullopt; // a height of 0 (set later by a DNL marker) too
  }
  const std::int64_t markers = row * per_row / l.restart_interval;
  const std::optional<std::size_t> data_at =
      after_restart_marker(bytes, scan_start, markers);
  if (!data_at) {
    return std::nullopt;
  }
  RestartCut cut;
  cut.rows = static_cast<int>(row) * l.mcu_height;
  cut.height_at = *height_at;
  cut.data_at = *data_at;
  cut.marker_shift = static_cast<int>(markers % 8);
  return cut;
}

} // namespace hotloop::data
