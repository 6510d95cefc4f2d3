#include "hotloop/data/decode/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "hotloop/data/decode/jpeg_region.h"
#include "hotloop/errors.h"

namespace hotloop::data {
DataError bad_image(const std::string& name, const std::string& what) {
  return DataError(
      fmt::format("{}: {}", name, what),
      "the file is damaged or not an image: replace or delete it (bad samples are skipped by default)");
}

void check_image_size(
    const std::string& name,
    int width,
    int height,
    std::int64_t max_pixels) {
  if (width <= 0 || height <= 0) {
    throw bad_image(name, fmt::format("invalid size {}x{}", width, height));
  }
  if (static_cast<std::int64_t>(width) * height > max_pixels) {
    throw DataError(
        fmt::format(
            "{}: {}x{} pixels is more than the {} hotloop accepts (--max-image-pixels)",
            name,
            width,
            height,
            max_pixels),
        "a damaged header, or a really large image: raise --max-image-pixels (Python: max_image_pixels=) to take it, or cut it into tiles; bad samples are skipped by default");
  }
}

namespace {

// A TurboJPEG decompressor for one file. Not kept across files: a handle
// keeps the tables of the files it read, so a file that leaves its Huffman
// tables out (Motion-JPEG frames rely on the standard ones) would decode
// with the previous file's (and TurboJPEG 2.x leaves a handle whose header
// read failed half-way unable to read the next file's size).
class JpegDecoder {
 public:
  JpegDecoder() : h_(tjInitDecompress()) {}
  ~JpegDecoder() {
    if (h_ != nullptr) {
      tjDestroy(h_);
    }
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
  tjhandle get() const {
    return h_;
  }

 private:
  tjhandle h_;
};

// The whole image through the libjpeg API (jpeg_region.h), which converts
// CMYK and YCCK to RGB as PIL does.
DecodedImage decode_jpeg_cmyk(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const DecodeOptions& o) {
  std::vector<std::uint8_t> buffer;
  const JpegRegion r = decode_jpeg_region(
      bytes,
      name,
      [&](const JpegInfo&) {
        return JpegRegionRequest{8, {}, o.channels};
      },
      buffer,
      o.max_pixels);
  // The whole image: rows are packed.
  return {r.rect.h, r.rect.w, o.channels, std::move(buffer)};
}

DecodedImage decode_jpeg(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const DecodeOptions& o) {
  const JpegDecoder decoder;
  tjhandle tj = decoder.get();
  if (tj == nullptr) {
    throw DataError(fmt::format("{}: cannot create a TurboJPEG decoder", name));
  }
  int width = 0;
  int height = 0;
  int subsampling = 0;
  int colorspace = 0;
  auto* data = const_cast<unsigned char*>(
      bytes.data()); // TurboJPEG 2.x takes non-const pointers
  const auto size = static_cast<unsigned long>(bytes.size());
  if (tjDecompressHeader3(
          tj, data, size, &width, &height, &subsampling, &colorspace) != 0) {
    throw bad_image(
        name, fmt::format("not a valid JPEG: {}", tjGetErrorStr2(tj)));
  }
  if (width <= 0 || height <= 0) {
    throw bad_image(
        name,
        "not a valid JPEG: the header has no image size (truncated file?)");
  }
  check_image_size(name, width, height, o.max_pixels);
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    // TurboJPEG 2.x cannot convert CMYK to RGB; the libjpeg path can.
    return decode_jpeg_cmyk(bytes, name, o);
  }
  DecodedImage img{height, width, o.channels, {}};
  img.pixels.resize(static_cast<std::size_t>(width) * height * o.channels);
  const int format = o.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // Stop on warnings: a truncated JPEG otherwise "decodes" with a gray bottom
  // half.
  if (tjDecompress2(
          tj,
          data,
          size,
          img.pixels.data(),
          width,
          0,
          height,
          format,
          TJFLAG_STOPONWARNING) != 0) {
    throw bad_image(
        name, fmt::format("corrupt JPEG data: {}", tjGetErrorStr2(tj)));
  }
  return img;
}

DecodedImage decode_png(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const DecodeOptions& o) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()) == 0) {
    throw bad_image(name, fmt::format("not a valid PNG: {}", png.message));
  }
  // Read with alpha and drop it afterwards, so that transparent pixels keep
  // their color (PIL's convert("RGB") does the same) instead of being
  // composited onto a background.
  png.format = o.channels == 1 ? PNG_FORMAT_GA : PNG_FORMAT_RGBA;
  const int width = static_cast<int>(png.width);
  const int height = static_cast<int>(png.height);
  try {
    check_image_size(name, width, height, o.max_pixels);
  } catch (...) {
    png_image_free(&png);
    throw;
  }
  std::vector<std::uint8_t> with_alpha(PNG_IMAGE_SIZE(png));
  if (png_image_finish_read(&png, nullptr, with_alpha.data(), 0, nullptr) ==
      0) {
    const std::string why = png.message;
    png_image_free(&png);
    throw bad_image(name, fmt::format("corrupt PNG data: {}", why));
  }
  DecodedImage img{height, width, o.channels, {}};
  const std::size_t pixels = static_cast<std::size_t>(width) * height;
  img.pixels.resize(pixels * o.channels);
  const std::size_t in_stride = o.channels + 1;
  for (std::size_t p = 0; p < pixels; ++p) {
    std::memcpy(
        &img.pixels[p * o.channels], &with_alpha[p * in_stride], o.channels);
  }
  return img;
}

} // namespace

ImageFormat sniff_image_format(std::span<const std::uint8_t> b) {
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
    return ImageFormat::Jpeg;
  }
  static constexpr std::uint8_t kPng[8] = {
      0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) {
    return ImageFormat::Png;
  }
  return ImageFormat::Unknown;
}

DecodedImage decode_image(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const DecodeOptions& options) {
  if (options.channels != 1 && options.channels != 3) {
    throw UsageError(fmt::format(
        "images decode to 1 or 3 channels, not {}", options.channels));
  }
  if (bytes.empty()) {
    throw bad_image(name, "empty file");
  }
  switch (sniff_image_format(bytes)) {
    case ImageFormat::Jpeg:
      return decode_jpeg(bytes, name, options);
    case ImageFormat::Png:
      return decode_png(bytes, name, options);
    case ImageFormat::Unknown:
      break;
  }
  throw bad_image(name, "unsupported format: hotloop reads JPEG and PNG");
}

} // namespace hotloop::data
