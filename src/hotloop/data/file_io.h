#pragma once
// Whole-file and ranged reads with errors that name the file.

#include <cstdint>
#include <string>
#include <vector>

namespace hotloop::data {

// The file's bytes. Throws DataError naming `path` when it cannot be opened or
// read.
std::vector<std::uint8_t> read_file(const std::string& path);

// `size` bytes at `offset`. Throws DataError when the file is shorter (it
// changed since it was indexed).
std::vector<std::uint8_t> read_file_range(
    const std::string& path,
    std::uint64_t offset,
    std::uint64_t size);

} // namespace hotloop::data
