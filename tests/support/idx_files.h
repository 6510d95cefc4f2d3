#pragma once
// Writes small IDX files (raw or gzip) for data tests.

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace hotloop::test {

// An IDX file's bytes: unsigned-byte type, the given dimensions, then `data`.
inline std::vector<std::uint8_t> idx_bytes(
    const std::vector<std::uint32_t>& dims,
    const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> out = {
      0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      out.push_back(static_cast<std::uint8_t>(d >> shift));
    }
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline void write_gzip(
    const std::filesystem::path& path,
    const std::vector<std::uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

} // namespace hotloop::test
