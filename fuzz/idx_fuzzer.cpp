// libFuzzer target for the IDX reader: any bytes must give a header or a
// DataError, never a crash, an out-of-bounds read or a huge allocation. Built
// and run by fuzz/run (clang, ASan + UBSan).
#include <cstddef>
#include <cstdint>
#include <span>

#include "hotloop/data/sources/idx.h"
#include "hotloop/errors.h"

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  try {
    const auto h = hotloop::data::parse_idx(
        std::span<const std::uint8_t>(data, size), "fuzz");
    // A parsed header must describe exactly the bytes that are there.
    if (h.data_offset + h.element_count != size) {
      __builtin_trap();
    }
  } catch (const hotloop::DataError&) {
  }
  return 0;
}
