#include "hotloop/data/decode/jpeg_region.h"

// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
// jerror.h after jpeglib.h: its WARNMS uses jpeglib's types.
#include <jerror.h>

#include <algorithm>
#include <array>
#include <csetjmp>
#include <optional>

#include <fmt/format.h>

#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/jpeg_restart_cut.h"
#include "hotloop/data/decode/libjpeg_errors.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

using libjpeg::ErrorManager;

// libjpeg's source of bytes: pieces of memory read one after another. A
// whole file is one piece; a restart cut (jpeg_restart_cut.h) is the header
// around its patched height, then the data after the cut's marker. Past the
// last piece comes an end-of-image marker and a warning, as jpeg_mem_src
// does (the warning stops the decode: on_message).
struct PieceSource {
  jpeg_source_mgr pub{};
  std::array<std::span<const std::uint8_t>, 4> pieces{};
  int count = 0;
  int next = 0;
  int marker_shift = 0; // RestartCut::marker_shift; 0 for a whole file
  std::array<std::uint8_t, 2> height{}; // the cut's patched height

  static PieceSource& of(j_decompress_ptr c) {
    return *reinterpret_cast<PieceSource*>(c->src);
  }
  void whole(std::span<const std::uint8_t> bytes) {
    start({bytes}, 0);
  }
  void cut(
      std::span<const std::uint8_t> bytes,
      std::size_t scan_start,
      const RestartCut& cut,
      int new_height) {
    height = {
        static_cast<std::uint8_t>(new_height >> 8),
        static_cast<std::uint8_t>(new_height & 0xFF)};
    start(
        {bytes.first(cut.height_at),
         std::span<const std::uint8_t>(height),
         bytes.subspan(cut.height_at + 2, scan_start - cut.height_at - 2),
         bytes.subspan(cut.data_at)},
        cut.marker_shift);
  }
  void start(
      std::initializer_list<std::span<const std::uint8_t>> list,
      int shift) {
    count = 0;
    for (const auto& piece : list) {
      pieces[static_cast<std::size_t>(count++)] = piece;
    }
    next = 0;
    marker_shift = shift;
    pub.next_input_byte = nullptr;
    pub.bytes_in_buffer = 0;
  }
  void install(jpeg_decompress_struct& c) {
    pub.init_source = [](j_decompress_ptr) {};
    pub.fill_input_buffer = fill;
    pub.skip_input_data = skip;
    pub.resync_to_restart = resync;
    pub.term_source = [](j_decompress_ptr) {};
    c.src = &pub;
  }

  static boolean fill(j_decompress_ptr c) {
    PieceSource& s = of(c);
    while (s.next < s.count) {
      const auto piece = s.pieces[static_cast<std::size_t>(s.next++)];
      if (!piece.empty()) {
        s.pub.next_input_byte = piece.data();
        s.pub.bytes_in_buffer = piece.size();
        return TRUE;
      }
    }
    static const JOCTET kEnd[2] = {0xFF, JPEG_EOI};
    WARNMS(c, JWRN_JPEG_EOF);
    s.pub.next_input_byte = kEnd;
    s.pub.bytes_in_buffer = 2;
    return TRUE;
  }
  static void skip(j_decompress_ptr c, long n) {
    PieceSource& s = of(c);
    while (n > static_cast<long>(s.pub.bytes_in_buffer)) {
      n -= static_cast<long>(s.pub.bytes_in_buffer);
      fill(c);
    }
    if (n > 0) {
      s.pub.next_input_byte += n;
      s.pub.bytes_in_buffer -= static_cast<std::size_t>(n);
    }
  }
  // After a cut the data's markers run `marker_shift` ahead of the ones
  // libjpeg counts from RST0: that one is the expected marker. Anything else
  // goes to libjpeg's resync, which warns (a corrupt file, as before).
  static boolean resync(j_decompress_ptr c, int desired) {
    const PieceSource& s = of(c);
    if (s.marker_shift != 0 &&
        c->unread_marker == JPEG_RST0 + (desired + s.marker_shift) % 8) {
      c->unread_marker = 0;
      return TRUE;
    }
    return jpeg_resync_to_restart(c, desired);
  }
};

// A thread's decompressor and its buffers. The libjpeg object is made for
// each file and destroyed after it (with_libjpeg): it keeps the tables of
// the files it read, so a file that leaves its Huffman tables out
// (Motion-JPEG frames rely on the standard ones) would decode with the
// previous file's, and after an error its state is not worth trusting.
class Decompressor {
 public:
  static Decompressor& of_this_thread() {
    thread_local Decompressor d;
    return d;
  }
  // Call only where errors() jumps back to.
  jpeg_decompress_struct& get() {
    if (!live_) {
      c_.err = libjpeg::install(errors_);
      jpeg_create_decompress(&c_);
      source_.install(c_);
      live_ = true;
    }
    return c_;
  }
  ErrorManager& errors() {
    return errors_;
  }
  std::vector<std::uint8_t>& cmyk_rows() {
    return cmyk_rows_;
  }
  PieceSource& source() {
    return source_;
  }
  void reset() {
    if (live_) {
      jpeg_destroy_decompress(&c_);
      live_ = false;
    }
  }
  ~Decompressor() {
    reset();
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

 private:
  Decompressor() = default;
  jpeg_decompress_struct c_{};
  ErrorManager errors_;
  bool live_ = false;
  std::vector<std::uint8_t> cmyk_rows_;
  PieceSource source_;
};

// Whether an end-of-image marker follows the first scan's start. Inside
// entropy-coded data 0xFF is always followed by 0x00 or a restart marker, so
// FF D9 there is the real end; a truncated file has none. (Data after the
// marker, which some cameras append, is allowed.)
bool has_end_marker(std::span<const std::uint8_t> b, std::size_t scan_start) {
  for (std::size_t i = b.size(); i >= scan_start + 2; --i) {
    if (b[i - 2] == 0xFF && b[i - 1] == 0xD9) {
      return true;
    }
  }
  return false;
}

// x * y / 255, rounded: PIL's MULDIV255.
inline std::uint8_t mul255(int x, int y) {
  const int t = x * y + 128;
  return static_cast<std::uint8_t>((t + (t >> 8)) >> 8);
}

// Adobe CMYK as libjpeg returns it (inverted: 255 is no ink) to RGB or
// luminance, as PIL's convert("RGB") and convert("L") do.
void cmyk_to(
    const std::uint8_t* cmyk,
    std::uint8_t* out,
    std::size_t pixels,
    int channels) {
  for (std::size_t p = 0; p < pixels; ++p) {
    const std::uint8_t* s = cmyk + p * 4;
    const std::uint8_t r = mul255(s[0], s[3]);
    const std::uint8_t g = mul255(s[1], s[3]);
    const std::uint8_t b = mul255(s[2], s[3]);
    if (channels == 1) {
      out[p] = static_cast<std::uint8_t>(
          (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
    } else {
      out[p * 3] = r;
      out[p * 3 + 1] = g;
      out[p * 3 + 2] = b;
    }
  }
}

// Reads the header of `bytes` into `c` and what hotloop needs of it: a file
// must end with its end-of-image marker and hold at most `max_pixels`.
JpegInfo header_info(
    Decompressor& d,
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    std::int64_t max_pixels,
    std::size_t& scan_start) {
  jpeg_decompress_struct& c = d.get();
  d.source().whole(bytes);
  jpeg_read_header(&c, TRUE);
  scan_start = bytes.size() - c.src->bytes_in_buffer;
  if (!has_end_marker(bytes, scan_start)) {
    throw bad_image(
        name, "truncated JPEG: the file ends before its end-of-image marker");
  }
  JpegInfo info;
  info.width = static_cast<int>(c.image_width);
  info.height = static_cast<int>(c.image_height);
  info.components = c.num_components;
  info.progressive = c.progressive_mode != 0;
  info.cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  info.arithmetic = c.arith_code != 0;
  info.precision = c.data_precision;
  if (c.num_components >= 3) {
    const jpeg_component_info& luma = c.comp_info[0];
    const jpeg_component_info& chroma = c.comp_info[1];
    info.subsampling_x =
        std::max(1, luma.h_samp_factor / std::max(1, chroma.h_samp_factor));
    info.subsampling_y =
        std::max(1, luma.v_samp_factor / std::max(1, chroma.v_samp_factor));
  }
  check_image_size(name, info.width, info.height, max_pixels);
  return info;
}

// With the header read, moves the decode's start down to the lowest restart
// marker at a row of MCUs whose first row is above `first_row` (the first
// row needed, in the image at k/8; one row of margin keeps fancy
// upsampling's context, which reaches one chroma row up) and re-reads the
// header from there, with the height that is left. Returns how many rows
// (at k/8) the decode skips, 0 where it starts at the top as before.
int start_at_restart(
    Decompressor& d,
    std::span<const std::uint8_t> bytes,
    std::size_t scan_start,
    int first_row,
    int scale_eighths) {
  jpeg_decompress_struct& c = d.get();
  const jpeg_component_info& luma = c.comp_info[0];
  const bool interleaved =
      c.num_components > 1 && c.comps_in_scan == c.num_components;
  const bool plain_gray = c.num_components == 1 && c.comps_in_scan == 1 &&
      luma.h_samp_factor == 1 && luma.v_samp_factor == 1;
  if (c.progressive_mode || c.arith_code || c.restart_interval == 0 ||
      first_row < 2 || (!interleaved && !plain_gray)) {
    return 0;
  }
  const int mcu_rows_scaled = c.max_v_samp_factor * scale_eighths;
  const std::optional<RestartCut> cut = find_restart_cut(
      bytes,
      scan_start,
      {static_cast<int>(c.image_width),
       static_cast<int>(c.image_height),
       8 * c.max_h_samp_factor,
       8 * c.max_v_samp_factor,
       static_cast<int>(c.restart_interval)},
      (first_row - 1) / mcu_rows_scaled);
  if (!cut) {
    return 0;
  }
  const int height = static_cast<int>(c.image_height) - cut->rows;
  jpeg_abort_decompress(&c);
  d.source().cut(bytes, scan_start, *cut, height);
  jpeg_read_header(&c, TRUE);
  return cut->rows / 8 * scale_eighths;
}

// The body of decode_jpeg_region, run where a libjpeg error jumps back to its
// caller: nothing here may own memory while libjpeg runs (a jump skips
// destructors).
void decode_protected(
    Decompressor& d,
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const std::function<JpegRegionRequest(const JpegInfo&)>& plan,
    std::vector<std::uint8_t>& buffer,
    std::int64_t max_pixels,
    JpegRegion& out) {
  jpeg_decompress_struct& c = d.get();
  std::size_t scan_start = 0;
  const JpegInfo info = header_info(d, bytes, name, max_pixels, scan_start);
  const JpegRegionRequest req = plan(info);
  if (req.channels != 1 && req.channels != 3) {
    throw UsageError(
        fmt::format("images decode to 1 or 3 channels, not {}", req.channels));
  }
  if (req.scale_eighths < 1 || req.scale_eighths > 8) {
    throw UsageError(fmt::format(
        "a JPEG decodes at 1/8 to 8/8 of its size, not {}/8",
        req.scale_eighths));
  }
  const int sw = scaled_size(info.width, req.scale_eighths);
  const int sh = scaled_size(info.height, req.scale_eighths);
  const PixelRect r = req.rect.w == 0 ? PixelRect{0, 0, sw, sh} : req.rect;
  if (r.x < 0 || r.y < 0 || r.w <= 0 || r.h <= 0 || r.x + r.w > sw ||
      r.y + r.h > sh) {
    throw UsageError(fmt::format(
        "{}: region {}x{} at ({}, {}) is outside the {}x{} image at {}/8",
        name,
        r.w,
        r.h,
        r.x,
        r.y,
        sw,
        sh,
        req.scale_eighths));
  }
  // Rows above the region that a restart cut skips (in the scaled image's
  // rows); the decode then starts at row `y0` of the image.
  const int y0 = start_at_restart(d, bytes, scan_start, r.y, req.scale_eighths);
  c.scale_num = static_cast<unsigned int>(req.scale_eighths);
  c.scale_denom = 8;
  c.out_color_space = info.cmyk ? JCS_CMYK
      : req.channels == 1       ? JCS_GRAYSCALE
                                : JCS_RGB;
  jpeg_start_decompress(&c);
  if (c.output_width != static_cast<JDIMENSION>(sw) ||
      c.output_height != static_cast<JDIMENSION>(sh - y0)) {
    throw DataError(fmt::format(
        "{}: libjpeg decodes {}/8 as {}x{}, not {}x{}",
        name,
        req.scale_eighths,
        c.output_width,
        c.output_height,
        sw,
        sh - y0));
  }
  // A column more on the left and two on the right where the image has
  // them: fancy upsampling treats the decoded columns' ends as the image's
  // edges (repeating their chroma), which changed the requested pixels there
  // by up to 2 levels (measured, 4:2:0); with them, they are a full decode's.
  const int left = std::max(0, r.x - 1);
  JDIMENSION x = static_cast<JDIMENSION>(left);
  JDIMENSION w = static_cast<JDIMENSION>(std::min(r.x + r.w + 2, sw) - left);
  if (x != 0 || w != c.output_width) {
    jpeg_crop_scanline(&c, &x, &w); // x moves left to the iMCU column
  }
  const int top = r.y - y0; // the region's first row in the decoded rows
  if (top > 0) {
    jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(top));
  }
  out.rect = {static_cast<int>(x), r.y, static_cast<int>(w), r.h};
  out.scaled_width = sw;
  out.scaled_height = sh;
  out.channels = req.channels;
  out.row_bytes = static_cast<std::size_t>(w) * req.channels;
  buffer.resize(out.row_bytes * static_cast<std::size_t>(r.h));
  const std::size_t cmyk_row = static_cast<std::size_t>(w) * 4;
  constexpr int kRows = 16;
  if (info.cmyk) {
    d.cmyk_rows().resize(cmyk_row * kRows);
  }
  const auto end = static_cast<JDIMENSION>(top + r.h);
  while (c.output_scanline < end) {
    const JDIMENSION first = c.output_scanline;
    const int n = static_cast<int>(std::min<JDIMENSION>(kRows, end - first));
    JSAMPROW rows[kRows];
    for (int i = 0; i < n; ++i) {
      rows[i] = info.cmyk ? d.cmyk_rows().data() + cmyk_row * i
                          : buffer.data() + out.row_bytes * (first - top + i);
    }
    const JDIMENSION got =
        jpeg_read_scanlines(&c, rows, static_cast<JDIMENSION>(n));
    if (info.cmyk) {
      for (JDIMENSION i = 0; i < got; ++i) {
        cmyk_to(
            rows[i],
            buffer.data() + out.row_bytes * (first - top + i),
            w,
            req.channels);
      }
    }
  }
  jpeg_abort_decompress(&c); // the rows below are never decoded
  out.pixels = buffer.data();
}

// Runs `body` on this thread's decompressor where a libjpeg error jumps
// back to: the error becomes a DataError naming `name` ("WHAT: libjpeg's
// message"). The decompressor is destroyed afterwards either way.
template <typename Body>
void with_libjpeg(const std::string& name, const char* what, Body&& body) {
  Decompressor& d = Decompressor::of_this_thread();
  try {
    if (setjmp(d.errors().jump) != 0) {
      const std::string why = d.errors().message;
      d.reset();
      throw bad_image(name, fmt::format("{}: {}", what, why));
    }
    body(d);
    d.reset();
  } catch (...) {
    d.reset();
    throw;
  }
}

} // namespace

int scaled_size(int size, int scale_eighths) {
  return static_cast<int>(
      (static_cast<std::int64_t>(size) * scale_eighths + 7) / 8);
}

JpegRegion decode_jpeg_region(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const std::function<JpegRegionRequest(const JpegInfo&)>& plan,
    std::vector<std::uint8_t>& buffer,
    std::int64_t max_pixels) {
  JpegRegion out;
  with_libjpeg(name, "corrupt JPEG data", [&](Decompressor& d) {
    decode_protected(d, bytes, name, plan, buffer, max_pixels, out);
  });
  return out;
}

JpegInfo read_jpeg_info(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    std::int64_t max_pixels) {
  JpegInfo info;
  with_libjpeg(name, "corrupt JPEG header", [&](Decompressor& d) {
    std::size_t scan_start = 0;
    info = header_info(d, bytes, name, max_pixels, scan_start);
    jpeg_abort_decompress(&d.get());
  });
  return info;
}

} // namespace hotloop::data
