#pragma once
// Reading zip archives as torch.save writes them (PyTorch's zip format: every
// member stored uncompressed, ZIP64 for large files). Deflated members, as
// Python's zipfile may write, are inflated. Only the central directory is
// trusted for sizes; every offset is checked against the buffer.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hotloop::model {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0; // 0 stored, 8 deflate
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
  std::uint64_t data_offset = 0; // of the member's bytes in the buffer
};

// The members of the archive in `bytes`. Throws DataError naming `file` when it
// is not a zip archive, is truncated or uses a feature this reader does not
// have (encryption, multi-disk, methods other than stored and deflate).
std::vector<ZipEntry> list_zip(
    std::span<const std::uint8_t> bytes,
    const std::string& file);

// A member's bytes: a view into `bytes` when stored, else inflated into
// `scratch` (at most entry.size bytes). Throws DataError when the data is
// corrupt.
std::span<const std::uint8_t> zip_member(
    std::span<const std::uint8_t> bytes,
    const ZipEntry& entry,
    std::vector<std::uint8_t>& scratch,
    const std::string& file);

} // namespace hotloop::model
