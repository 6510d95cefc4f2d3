#include "hotloop/data/decode/image_encode.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "hotloop/data/decode/libjpeg_errors.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// A compressor (and, for a rewrite, a decompressor) with hotloop's error
// handlers and the output libjpeg allocates; destroyed on every path. The
// functions below make one before their setjmp, so a jump back to it leaves
// this object whole.
struct Writer {
  libjpeg::ErrorManager errors;
  jpeg_decompress_struct in{};
  jpeg_compress_struct out{};
  unsigned char* buffer = nullptr;
  unsigned long size = 0;

  Writer() = default;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    jpeg_destroy_compress(&out); // safe on a struct never created
    jpeg_destroy_decompress(&in);
    std::free(buffer); // jpeg_mem_dest's, malloc'd
  }
  void create_out() {
    out.err = libjpeg::install(errors);
    jpeg_create_compress(&out);
    jpeg_mem_dest(&out, &buffer, &size);
  }
  // Huffman tables fitted to the image (a second pass over its
  // coefficients; smaller files, less to decode) and a restart marker per
  // MCU row, or none.
  void tables_and_restarts(bool restart_rows) {
    out.optimize_coding = TRUE;
    out.restart_in_rows = restart_rows ? 1 : 0;
  }
  std::vector<std::uint8_t> bytes() const {
    return {buffer, buffer + size};
  }
};

// Whether saved segment `m` is `marker` with data starting with `id`'s
// `n` bytes.
bool is_segment(
    const jpeg_saved_marker_ptr m,
    int marker,
    const char* id,
    std::size_t n) {
  return m->marker == marker && m->data_length >= n &&
      std::memcmp(m->data, id, n) == 0;
}

} // namespace

std::vector<std::uint8_t> encode_jpeg(
    const std::uint8_t* pixels,
    int height,
    int width,
    int channels,
    int quality,
    bool restart_rows) {
  if (channels != 1 && channels != 3) {
    throw UsageError(
        fmt::format("JPEG encode: 1 or 3 channels, not {}", channels));
  }
  if (quality < 1 || quality > 100) {
    throw UsageError(
        fmt::format("JPEG quality {}: must be 1 to 100", quality),
        "90 keeps photos near their originals at a third of the bytes");
  }
  Writer w;
  if (setjmp(w.errors.jump) != 0) {
    throw DataError(fmt::format(
        "JPEG encode of {}x{} pixels failed: {}",
        width,
        height,
        w.errors.message));
  }
  w.create_out();
  w.out.image_width = static_cast<JDIMENSION>(width);
  w.out.image_height = static_cast<JDIMENSION>(height);
  w.out.input_components = channels;
  w.out.in_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&w.out); // color: YCbCr at 4:2:0, the accurate DCT
  jpeg_set_quality(&w.out, quality, TRUE);
  w.tables_and_restarts(restart_rows);
  jpeg_start_compress(&w.out, TRUE);
  const std::size_t stride = static_cast<std::size_t>(width) * channels;
  while (w.out.next_scanline < w.out.image_height) {
    auto* row = const_cast<JSAMPROW>(pixels + stride * w.out.next_scanline);
    jpeg_write_scanlines(&w.out, &row, 1);
  }
  jpeg_finish_compress(&w.out);
  return w.bytes();
}

std::optional<std::vector<std::uint8_t>> with_row_restarts(
    std::span<const std::uint8_t> bytes,
    std::int64_t max_pixels) {
  if (bytes.size() < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8) {
    return std::nullopt;
  }
  Writer w;
  if (setjmp(w.errors.jump) != 0) {
    return std::nullopt; // kept as it is: the loader judges it as before
  }
  w.in.err = libjpeg::install(w.errors);
  jpeg_create_decompress(&w.in);
  w.create_out();
  jpeg_mem_src(&w.in, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&w.in, JPEG_COM, 0xFFFF);
  for (int k = 0; k < 16; ++k) {
    jpeg_save_markers(&w.in, JPEG_APP0 + k, 0xFFFF);
  }
  jpeg_read_header(&w.in, TRUE);
  const std::int64_t pixels =
      static_cast<std::int64_t>(w.in.image_width) * w.in.image_height;
  if (w.in.data_precision != 8 || pixels > max_pixels) {
    return std::nullopt; // larger ones: the loader refuses them unread
  }
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&w.in);
  jpeg_copy_critical_parameters(&w.in, &w.out);
  w.tables_and_restarts(true);
  jpeg_write_coefficients(&w.out, coefficients);
  // The source's segments, but for the JFIF and Adobe ones the compressor
  // writes itself (as jpegtran -copy all does).
  for (jpeg_saved_marker_ptr m = w.in.marker_list; m != nullptr; m = m->next) {
    if ((w.out.write_JFIF_header && is_segment(m, JPEG_APP0, "JFIF", 5)) ||
        (w.out.write_Adobe_marker &&
         is_segment(m, JPEG_APP0 + 14, "Adobe", 5))) {
      continue;
    }
    jpeg_write_marker(&w.out, m->marker, m->data, m->data_length);
  }
  jpeg_finish_compress(&w.out);
  jpeg_finish_decompress(&w.in); // to its end-of-image marker
  return w.bytes();
}

} // namespace hotloop::data
