#include "hotloop/data/decode/image_encode.h"

#include <turbojpeg.h>

#include <memory>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {

std::vector<std::uint8_t> encode_jpeg(
    const std::uint8_t* pixels,
    int height,
    int width,
    int channels,
    int quality) {
  if (channels != 1 && channels != 3) {
    throw UsageError(
        fmt::format("JPEG encode: 1 or 3 channels, not {}", channels));
  }
  if (quality < 1 || quality > 100) {
    throw UsageError(
        fmt::format("JPEG quality {}: must be 1 to 100", quality),
        "90 keeps photos near their originals at a third of the bytes");
  }
  const std::unique_ptr<void, int (*)(tjhandle)> encoder(
      tjInitCompress(), tjDestroy);
  if (!encoder) {
    throw DataError("TurboJPEG: cannot make a JPEG encoder (out of memory?)");
  }
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(
      encoder.get(),
      pixels,
      width,
      0, // rows are packed
      height,
      channels == 3 ? TJPF_RGB : TJPF_GRAY,
      &out,
      &size,
      channels == 3 ? TJSAMP_420 : TJSAMP_GRAY,
      quality,
      0); // the accurate DCT, TurboJPEG's default for encoding
  const std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(
      out, tjFree);
  if (rc != 0) {
    throw DataError(fmt::format(
        "JPEG encode of {}x{} pixels failed: {}",
        width,
        height,
        tjGetErrorStr2(encoder.get())));
  }
  return std::vector<std::uint8_t>(out, out + size);
}

} // namespace hotloop::data
