#include "hotloop/data/sources/idx.h"

#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

constexpr std::uint8_t kTypeUnsignedByte = 0x08;
constexpr std::size_t kMaxDims = 8;

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
      (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

DataError corrupt(const std::string& name, const std::string& what) {
  return DataError(
      fmt::format("{}: not a valid IDX file: {}", name, what),
      "the file is damaged or is not MNIST/Fashion-MNIST data: reinstall the data set "
      "(Debian: apt-get install --reinstall dataset-fashion-mnist) or download it again");
}

bool is_gzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, 2> magic{};
  in.read(reinterpret_cast<char*>(magic.data()), 2);
  return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

} // namespace

IdxHeader parse_idx(
    std::span<const std::uint8_t> bytes,
    const std::string& name) {
  if (bytes.size() < 4) {
    throw corrupt(
        name,
        fmt::format(
            "{} bytes, shorter than the 4-byte magic number", bytes.size()));
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    throw corrupt(
        name,
        fmt::format(
            "magic number starts with 0x{:02x}{:02x}, expected 0x0000",
            bytes[0],
            bytes[1]));
  }
  if (bytes[2] != kTypeUnsignedByte) {
    throw corrupt(
        name,
        fmt::format(
            "element type 0x{:02x}, hotloop reads unsigned bytes (0x08)",
            bytes[2]));
  }
  const std::size_t ndims = bytes[3];
  if (ndims == 0 || ndims > kMaxDims) {
    throw corrupt(
        name, fmt::format("{} dimensions, expected 1 to {}", ndims, kMaxDims));
  }
  IdxHeader h;
  h.data_offset = 4 + 4 * ndims;
  if (bytes.size() < h.data_offset) {
    throw corrupt(
        name,
        fmt::format(
            "truncated header: {} bytes for {} dimensions",
            bytes.size(),
            ndims));
  }
  std::size_t count = 1;
  for (std::size_t i = 0; i < ndims; ++i) {
    const std::uint32_t d = read_be32(bytes.data() + 4 + 4 * i);
    if (d == 0) {
      throw corrupt(name, fmt::format("dimension {} is 0", i));
    }
    if (count > std::numeric_limits<std::size_t>::max() / d) {
      throw corrupt(name, "dimensions overflow");
    }
    count *= d;
    h.dims.push_back(d);
  }
  h.element_count = count;
  const std::size_t have = bytes.size() - h.data_offset;
  if (have < count) {
    throw corrupt(
        name,
        fmt::format(
            "truncated: the header promises {} bytes of data, the file has {}",
            count,
            have));
  }
  if (have > count) {
    throw corrupt(
        name,
        fmt::format(
            "{} bytes after the {} the header describes", have - count, count));
  }
  return h;
}

std::vector<std::uint8_t> read_file_maybe_gzip(
    const std::string& path,
    std::size_t max_bytes) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) {
    throw DataError(
        fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  probe.close();
  const bool gz = is_gzip(path);
  // gzread also passes uncompressed files through; one reader for both keeps
  // the error handling in one place.
  gzFile f = ::gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw DataError(
        fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  std::vector<std::uint8_t> out;
  std::array<std::uint8_t, 1 << 16> chunk{};
  for (;;) {
    const int n =
        ::gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const std::string why = ::gzerror(f, &code);
      ::gzclose(f);
      throw DataError(
          fmt::format(
              "{}: corrupt {} data: {}", path, gz ? "gzip" : "file", why),
          "the file is damaged: download or reinstall it");
    }
    if (n == 0) {
      break;
    }
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::gzclose(f);
      throw DataError(
          fmt::format(
              "{}: larger than {} bytes once decompressed", path, max_bytes),
          "this is not the file hotloop expected here");
    }
    out.insert(out.end(), chunk.data(), chunk.data() + n);
  }
  int code = 0;
  const char* why = ::gzerror(f, &code);
  const std::string message = why != nullptr ? why : "";
  const int close_rc = ::gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw DataError(
        fmt::format("{}: corrupt gzip data: {}", path, message),
        "the file is damaged: download or reinstall it");
  }
  if (gz && close_rc == Z_BUF_ERROR) {
    throw DataError(
        fmt::format(
            "{}: truncated gzip file (it ends in the middle of the compressed data)",
            path),
        "the file is incomplete: download or reinstall it");
  }
  return out;
}

} // namespace hotloop::data
