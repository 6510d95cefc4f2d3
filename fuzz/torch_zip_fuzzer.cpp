// libFuzzer target for the torch.save() zip reader (zip directory + pickle
// interpreter): any bytes must give tensor records whose every element lies
// inside the input, or a DataError; never a crash, a leak, an out-of-bounds
// read or a huge allocation. Built and run by fuzz/run.
#include <cstddef>
#include <cstdint>
#include <span>

#include "hotloop/errors.h"
#include "hotloop/model/weight_formats/torch_zip_format.h"

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  try {
    for (const auto& t : hotloop::model::parse_torch_zip(
             std::span<const std::uint8_t>(data, size), "fuzz")) {
      if (t.data_offset > size || t.data_size > size - t.data_offset) {
        __builtin_trap();
      }
    }
  } catch (const hotloop::DataError&) {
  }
  return 0;
}
