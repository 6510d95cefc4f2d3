#pragma once
// The IDX format of MNIST and Fashion-MNIST: a big-endian header (two zero
// bytes, a type code, the number of dimensions, then each dimension as uint32)
// followed by the data. hotloop reads the unsigned-byte type (0x08) that both
// data sets use. Pure byte parsing, no LibTorch, so the fuzz target
// (fuzz/idx_fuzzer.cpp) can exercise it alone.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hotloop::data {

struct IdxHeader {
  std::vector<std::uint32_t> dims; // e.g. {60000, 28, 28}
  std::size_t data_offset = 0; // where the data starts in the file's bytes
  std::size_t element_count =
      0; // product of dims; the data is exactly this many bytes
};

// Checks the magic, the type code, the dimensions and that the data is exactly
// as long as they say. `name` (the file's path) goes into every error. Throws
// DataError.
IdxHeader parse_idx(
    std::span<const std::uint8_t> bytes,
    const std::string& name);

// The whole file, decompressed when it is gzip (detected by its magic bytes,
// not its name). Throws DataError naming the path for a missing, unreadable or
// corrupt file, or one that would decompress to more than `max_bytes`.
std::vector<std::uint8_t> read_file_maybe_gzip(
    const std::string& path,
    std::size_t max_bytes = std::size_t{1} << 32);

} // namespace hotloop::data
