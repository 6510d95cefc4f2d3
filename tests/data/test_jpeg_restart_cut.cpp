// Starting a region's decode at a restart marker below the top
// (data/decode/jpeg_restart_cut.h, used by jpeg_region.cpp): where the cut
// falls, that the pixels are a whole decode's at every scale, and that the
// rows above the cut are never read.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "hotloop/data/decode/jpeg_region.h"
#include "hotloop/data/decode/jpeg_restart_cut.h"
#include "hotloop/errors.h"
#include "support/image_files.h"

namespace hotloop::data {
namespace {

using test::JpegWriteOptions;

constexpr std::int64_t kLimit = std::int64_t{1} << 28;

std::vector<std::uint8_t> file(int h, int w, int c, const JpegWriteOptions& o) {
  return test::jpeg_file(test::textured_image(h, w, c, 3), h, w, c, o);
}

JpegWriteOptions rows(int n, bool subsample_420 = true) {
  JpegWriteOptions o;
  o.restart_rows = n;
  o.subsample_420 = subsample_420;
  return o;
}

JpegWriteOptions interval(int mcus) {
  JpegWriteOptions o;
  o.restart_interval = mcus;
  return o;
}

// The offset of the first scan's entropy-coded data: after the SOS segment.
std::size_t scan_start(const std::vector<std::uint8_t>& b) {
  for (std::size_t i = 2; i + 3 < b.size(); ++i) {
    if (b[i] == 0xFF && b[i + 1] == 0xDA) {
      return i + 2 + (static_cast<std::size_t>(b[i + 2]) << 8 | b[i + 3]);
    }
  }
  return b.size();
}

// Offsets just after each restart marker of the entropy-coded data.
std::vector<std::size_t> after_markers(const std::vector<std::uint8_t>& b) {
  std::vector<std::size_t> at;
  for (std::size_t i = scan_start(b); i + 1 < b.size(); ++i) {
    if (b[i] == 0xFF && b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7) {
      at.push_back(i + 2);
    }
  }
  return at;
}

// `rect` of the image at k/8, through decode_jpeg_region: interleaved rows
// of `channels`, cropped to the rect's own columns.
std::vector<std::uint8_t> region(
    const std::vector<std::uint8_t>& bytes,
    int k,
    PixelRect rect,
    int channels) {
  std::vector<std::uint8_t> buffer;
  const JpegRegion r = decode_jpeg_region(
      bytes,
      "r.jpg",
      [&](const JpegInfo&) {
        return JpegRegionRequest{k, rect, channels};
      },
      buffer,
      kLimit);
  if (rect.w == 0) {
    rect = {0, 0, r.rect.w, r.rect.h};
  }
  std::vector<std::uint8_t> out;
  for (int y = 0; y < rect.h; ++y) {
    const std::uint8_t* row = r.pixels + r.row_bytes * y +
        static_cast<std::size_t>(rect.x - r.rect.x) * channels;
    out.insert(out.end(), row, row + rect.w * channels);
  }
  return out;
}

} // namespace

TEST(JpegRestartCut, FindsTheMarkerAtTheLowestRowAtOrAboveTheOneAsked) {
  // 320 x 240 at 4:2:0: 20 MCUs of 16 x 16 per row, 15 rows.
  const ScanLayout layout{320, 240, 16, 16, 20};
  const auto every_row = file(240, 320, 3, rows(1));
  const auto markers = after_markers(every_row);
  ASSERT_EQ(markers.size(), 14u); // none after the last row
  const auto cut =
      find_restart_cut(every_row, scan_start(every_row), layout, 5);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->rows, 5 * 16);
  EXPECT_EQ(cut->data_at, markers[4]); // after the 5th marker (RST4)
  EXPECT_EQ(cut->marker_shift, 5); // the data's next marker is RST5
  EXPECT_EQ(every_row[cut->height_at], 0);
  EXPECT_EQ(every_row[cut->height_at + 1], 240);
  // Eight rows on, the markers' numbers have come round: no shift.
  EXPECT_EQ(
      find_restart_cut(every_row, scan_start(every_row), layout, 8)
          ->marker_shift,
      0);

  struct Case {
    const char* what;
    int mcus; // the restart interval
    int asked;
    int row; // the cut's row
    int shift;
  };
  for (const Case& c : {
           Case{"every 2 rows", 40, 5, 4, 2},
           Case{"every half row", 10, 5, 5, 2}, // 10 markers
           Case{"every 7 MCUs: rows 0, 7, 14", 7, 10, 7, 4}, // 20 markers
       }) {
    SCOPED_TRACE(c.what);
    const auto bytes = file(240, 320, 3, interval(c.mcus));
    ScanLayout l = layout;
    l.restart_interval = c.mcus;
    const auto got = find_restart_cut(bytes, scan_start(bytes), l, c.asked);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->rows, c.row * 16);
    EXPECT_EQ(got->marker_shift, c.shift);
    EXPECT_EQ(
        got->data_at,
        after_markers(
            bytes)[static_cast<std::size_t>(c.row * 20 / c.mcus - 1)]);
  }
}

TEST(JpegRestartCut, NoCutWithoutMarkersInTheirPlaceOrForOtherFiles) {
  const ScanLayout layout{320, 240, 16, 16, 20};
  const auto bytes = file(240, 320, 3, rows(1));
  const std::size_t start = scan_start(bytes);
  EXPECT_FALSE(find_restart_cut(bytes, start, layout, 0)); // the top
  EXPECT_FALSE(find_restart_cut(bytes, start, layout, 15)); // past the end
  ScanLayout none = layout;
  none.restart_interval = 0;
  EXPECT_FALSE(find_restart_cut(bytes, start, none, 5));
  ScanLayout taller = layout;
  taller.height = 256; // the frame header says 240
  EXPECT_FALSE(find_restart_cut(bytes, start, taller, 5));
  // A marker out of its order: RST2 written as RST5.
  auto disordered = bytes;
  disordered[after_markers(bytes)[2] - 1] = 0xD5;
  EXPECT_FALSE(find_restart_cut(disordered, start, layout, 5));
  EXPECT_TRUE(find_restart_cut(disordered, start, layout, 2)); // above it
  // A progressive file's markers restart each scan: never cut.
  JpegWriteOptions progressive = rows(1);
  progressive.progressive = true;
  const auto p = file(240, 320, 3, progressive);
  EXPECT_FALSE(find_restart_cut(p, scan_start(p), layout, 5));
  // Cut short: the marker is not there.
  const std::vector<std::uint8_t> cut_short(
      bytes.begin(),
      bytes.begin() + static_cast<long>(after_markers(bytes)[1]));
  EXPECT_FALSE(find_restart_cut(cut_short, start, layout, 5));
}

// From every starting row (every phase of the 16- or 8-row MCU) and at every
// scale libjpeg has, a region of a file with restart markers is the same
// rows of the whole image decoded at that scale, bit for bit: the cut keeps
// one MCU row of margin above the region for fancy upsampling's context.
TEST(JpegRestartCut, ARegionFromACutHasTheWholeDecodesPixelsAtEveryScale) {
  struct Case {
    const char* what;
    int channels_in;
    JpegWriteOptions options;
  };
  const Case cases[] = {
      {"4:2:0, every row", 3, rows(1)},
      {"4:2:0, every 2 rows", 3, rows(2)},
      {"4:4:4, every row", 3, rows(1, false)},
      {"gray, every row", 1, rows(1, false)},
      {"4:2:0, every 7 MCUs", 3, interval(7)},
  };
  for (const Case& c : cases) {
    const auto bytes = file(240, 320, c.channels_in, c.options);
    for (const int k : {8, 7, 5, 4, 3, 2, 1}) {
      for (const int channels : {3, 1}) {
        const auto whole = region(bytes, k, {}, channels);
        const int sw = scaled_size(320, k);
        const int sh = scaled_size(240, k);
        for (int y = 0; y < sh; ++y) {
          SCOPED_TRACE(
              testing::Message() << c.what << ", " << k << "/8, " << channels
                                 << " channel(s), from row " << y);
          const PixelRect r{5, y, std::min(60, sw - 5), std::min(9, sh - y)};
          const auto got = region(bytes, k, r, channels);
          std::vector<std::uint8_t> want;
          for (int row = r.y; row < r.y + r.h; ++row) {
            const auto* p = whole.data() +
                (static_cast<std::size_t>(row) * sw + r.x) * channels;
            want.insert(want.end(), p, p + r.w * channels);
          }
          ASSERT_EQ(got, want);
        }
      }
    }
  }
}

// Damage in the rows above the cut is never read: a region below it decodes
// to the undamaged file's pixels, while a decode from the top fails there.
// (Without the cut libjpeg reads those rows and stops at the damage.)
TEST(JpegRestartCut, TheRowsAboveTheCutAreNeverRead) {
  const auto bytes = file(240, 320, 3, rows(1));
  const auto markers = after_markers(bytes);
  auto damaged = bytes;
  // Row 1's data, up to its marker: zeros (no 0xFF, so the markers stay).
  std::fill(
      damaged.begin() + static_cast<long>(markers[0]),
      damaged.begin() + static_cast<long>(markers[1]) - 2,
      std::uint8_t{0});
  const PixelRect below{10, 100, 200, 50}; // MCU rows 6-9; the cut at 6
  EXPECT_EQ(region(damaged, 8, below, 3), region(bytes, 8, below, 3));
  EXPECT_EQ(
      region(damaged, 4, {5, 50, 100, 25}, 3),
      region(bytes, 4, {5, 50, 100, 25}, 3));
  EXPECT_THROW(region(damaged, 8, {10, 0, 200, 50}, 3), DataError);
  // The file is still checked whole for its end: cut short below the
  // region, it is refused as before.
  const std::vector<std::uint8_t> truncated(
      bytes.begin(), bytes.begin() + static_cast<long>(markers[12]));
  EXPECT_THROW(region(truncated, 8, below, 3), DataError);
}

} // namespace hotloop::data
