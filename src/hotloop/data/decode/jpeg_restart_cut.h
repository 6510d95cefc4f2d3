#pragma once
// Starting a baseline JPEG's decode at a row of blocks below its top, where
// the file has restart markers at row starts. A baseline file's
// entropy-coded data has no index: every row above a crop must be
// Huffman-decoded to reach the crop. A restart marker resets the decoder
// (the DC predictions start again from zero, at a whole byte), so the data
// after one decodes as the first row of an image whose height is what is
// left. `hotloop pack` writes a marker at each row of blocks; some cameras
// do too. This file finds the cut from the bytes alone (no libjpeg);
// jpeg_region.cpp hands libjpeg the header, with the height patched, and
// the data from the cut.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace hotloop::data {

// What the header says of the first scan's layout, at full scale.
struct ScanLayout {
  int width = 0;
  int height = 0;
  int mcu_width = 0; // pixels: 8 x the largest horizontal sampling factor
  int mcu_height = 0; // pixels: 8 x the largest vertical one
  int restart_interval = 0; // MCUs between markers; 0: none
};

struct RestartCut {
  int rows = 0; // full-scale pixel rows skipped: a whole number of MCU rows
  std::size_t height_at = 0; // offset of the frame header's 2-byte height
  std::size_t data_at = 0; // first byte after the marker the cut follows
  // The data's next marker is RST(n + shift) where libjpeg expects RST(n).
  int marker_shift = 0;
};

// The cut at the lowest row of MCUs at or above `mcu_row` that starts just
// after a restart marker, or none: no markers, none at such a row, a row
// 0 cut, or markers that are not where the layout puts them (a corrupt file
// decodes from its start and fails there as before). `scan_start` is the
// offset of the first scan's entropy-coded data. Reads only `bytes`.
std::optional<RestartCut> find_restart_cut(
    std::span<const std::uint8_t> bytes,
    std::size_t scan_start,
    const ScanLayout& layout,
    int mcu_row);

} // namespace hotloop::data
