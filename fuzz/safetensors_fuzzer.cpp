// libFuzzer target for the safetensors reader behind --init, --weights and
// `hotloop weights`: any bytes must give tensor records that lie inside the
// input, or a DataError; never a crash, an out-of-bounds read or a huge
// allocation. Built and run by fuzz/run.
#include <cstddef>
#include <cstdint>
#include <span>

#include "hotloop/errors.h"
#include "hotloop/model/weight_formats/safetensors_format.h"

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  try {
    const auto file = hotloop::model::parse_safetensors(
        std::span<const std::uint8_t>(data, size), "fuzz");
    for (const auto& t : file.tensors) {
      if (t.data_offset > size || t.data_size > size - t.data_offset) {
        __builtin_trap();
      }
    }
  } catch (const hotloop::DataError&) {
  }
  return 0;
}
