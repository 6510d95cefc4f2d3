// libFuzzer target for the tar reader behind wds: shards: any bytes must give a
// member list or a DataError, never a crash, an out-of-bounds read or a huge
// allocation. Built and run by fuzz/run.
#include <cstddef>
#include <cstdint>
#include <span>

#include "hotloop/data/sources/tar.h"
#include "hotloop/errors.h"

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  try {
    for (const auto& m : hotloop::data::list_tar(
             std::span<const std::uint8_t>(data, size), "fuzz")) {
      // Every member the reader reports lies inside the input.
      if (m.offset > size || m.size > size - m.offset) {
        __builtin_trap();
      }
    }
  } catch (const hotloop::DataError&) {
  }
  return 0;
}
