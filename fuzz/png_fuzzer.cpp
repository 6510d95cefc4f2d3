// libFuzzer target for the PNG decoder (data/decode/image_decode.h, libpng's
// simplified API): any bytes must decode or give a DataError, never a crash,
// an out-of-bounds access or a huge allocation; what decodes has the size
// and channels asked for. Built and run by fuzz/run, seeded with
// fuzz/seeds/png (RGB, RGBA, gray, 16-bit gray, palette).
#include <cstddef>
#include <cstdint>
#include <span>

#include "decoded_image.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/errors.h"

namespace {

// Small images only: the limit is what is fuzzed, not the allocator.
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 20;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  for (const int channels : {3, 1}) {
    try {
      const auto img = hotloop::data::decode_image(
          bytes, "fuzz.png", {channels, kMaxPixels});
      fuzz::check_decoded(img, channels, kMaxPixels);
    } catch (const hotloop::DataError&) {
    }
  }
  return 0;
}
