#include "hotloop/model/weight_formats/zip_archive.h"

#include <algorithm>

#include <fmt/format.h>
#include <zlib.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

constexpr std::uint32_t kEndOfCentralDir = 0x06054b50;
constexpr std::uint32_t kZip64EndOfCentralDir = 0x06064b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::uint64_t kMaxEntries = 1'000'000;

[[noreturn]] void corrupt(const std::string& file, const std::string& why) {
  throw DataError(
      fmt::format("{}: not a readable zip archive: {}", file, why),
      "the file is truncated or is not a torch.save() file; save it again with torch.save(model.state_dict(), path)");
}

// Little-endian reads, bounds-checked against the buffer.
class Reader {
 public:
  Reader(std::span<const std::uint8_t> bytes, const std::string& file)
      : bytes_(bytes), file_(file) {}
  bool fits(std::uint64_t offset, std::uint64_t size) const {
    return offset <= bytes_.size() && size <= bytes_.size() - offset;
  }
  void need(std::uint64_t offset, std::uint64_t size, const char* what) const {
    if (!fits(offset, size)) {
      corrupt(file_, fmt::format("{} runs past the end of the file", what));
    }
  }
  std::uint64_t le(std::uint64_t offset, int width) const {
    std::uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) {
      v = (v << 8) | bytes_[offset + i];
    }
    return v;
  }
  std::uint16_t u16(std::uint64_t o) const {
    return static_cast<std::uint16_t>(le(o, 2));
  }
  std::uint32_t u32(std::uint64_t o) const {
    return static_cast<std::uint32_t>(le(o, 4));
  }
  std::uint64_t u64(std::uint64_t o) const {
    return le(o, 8);
  }
  std::span<const std::uint8_t> bytes() const {
    return bytes_;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  const std::string& file_;
};

} // namespace

std::vector<ZipEntry> list_zip(
    std::span<const std::uint8_t> bytes,
    const std::string& file) {
  const Reader r(bytes, file);
  // The end-of-central-directory record is the last 22 bytes plus a comment
  // of up to 64 KiB: search backwards.
  if (bytes.size() < 22) {
    corrupt(file, "shorter than a zip end record");
  }
  std::uint64_t eocd = bytes.size() - 22;
  const std::uint64_t lowest =
      bytes.size() > 22 + 65535 ? bytes.size() - 22 - 65535 : 0;
  while (r.u32(eocd) != kEndOfCentralDir) {
    if (eocd == lowest) {
      corrupt(file, "no end-of-central-directory record");
    }
    --eocd;
  }
  if (r.u16(eocd + 4) != 0 || r.u16(eocd + 6) != 0) {
    corrupt(file, "multi-disk archives are not supported");
  }
  std::uint64_t count = r.u16(eocd + 10);
  std::uint64_t dir_size = r.u32(eocd + 12);
  std::uint64_t dir_offset = r.u32(eocd + 16);
  // ZIP64: the locator sits just before the end record.
  if (eocd >= 20 && r.u32(eocd - 20) == kZip64Locator) {
    const std::uint64_t z64 = r.u64(eocd - 20 + 8);
    r.need(z64, 56, "the ZIP64 end record");
    if (r.u32(z64) != kZip64EndOfCentralDir) {
      corrupt(file, "bad ZIP64 end record");
    }
    count = r.u64(z64 + 32);
    dir_size = r.u64(z64 + 40);
    dir_offset = r.u64(z64 + 48);
  }
  r.need(dir_offset, dir_size, "the central directory");
  if (count > kMaxEntries || count > dir_size / 46 + 1) {
    corrupt(file, fmt::format("implausible member count {}", count));
  }

  std::vector<ZipEntry> entries;
  entries.reserve(count);
  std::uint64_t p = dir_offset;
  for (std::uint64_t i = 0; i < count; ++i) {
    r.need(p, 46, "a central directory entry");
    if (r.u32(p) != kCentralHeader) {
      corrupt(file, fmt::format("bad central directory entry {}", i));
    }
    ZipEntry e;
    const std::uint16_t flags = r.u16(p + 8);
    e.method = r.u16(p + 10);
    e.compressed_size = r.u32(p + 20);
    e.size = r.u32(p + 24);
    const std::uint16_t name_len = r.u16(p + 28);
    const std::uint16_t extra_len = r.u16(p + 30);
    const std::uint16_t comment_len = r.u16(p + 32);
    std::uint64_t local = r.u32(p + 42);
    r.need(
        p + 46,
        std::uint64_t{name_len} + extra_len + comment_len,
        "a member name");
    e.name.assign(
        reinterpret_cast<const char*>(bytes.data() + p + 46), name_len);
    if ((flags & 1) != 0) {
      corrupt(file, fmt::format("member {} is encrypted", e.name));
    }
    // ZIP64 extra field: the 64-bit values, in order, for the fields that
    // are 0xFFFFFFFF.
    std::uint64_t x = p + 46 + name_len;
    const std::uint64_t x_end = x + extra_len;
    while (x + 4 <= x_end) {
      const std::uint16_t id = r.u16(x);
      const std::uint16_t len = r.u16(x + 2);
      if (x + 4 + len > x_end) {
        corrupt(file, fmt::format("member {}: bad extra field", e.name));
      }
      if (id == 1) {
        std::uint64_t f = x + 4;
        auto take = [&](std::uint64_t& field) {
          if (field == 0xFFFFFFFFu) {
            if (f + 8 > x + 4 + len) {
              corrupt(
                  file, fmt::format("member {}: short ZIP64 field", e.name));
            }
            field = r.u64(f);
            f += 8;
          }
        };
        take(e.size);
        take(e.compressed_size);
        take(local);
      }
      x += 4 + std::uint64_t{len};
    }
    if (e.method != 0 && e.method != 8) {
      corrupt(
          file,
          fmt::format(
              "member {} uses compression method {} (stored and deflate are supported)",
              e.name,
              e.method));
    }
    if (e.method == 0 && e.size != e.compressed_size) {
      corrupt(
          file,
          fmt::format("member {}: stored with two different sizes", e.name));
    }
    r.need(local, 30, "a local header");
    if (r.u32(local) != kLocalHeader) {
      corrupt(file, fmt::format("member {}: bad local header", e.name));
    }
    e.data_offset = local + 30 + r.u16(local + 26) + r.u16(local + 28);
    r.need(
        e.data_offset,
        e.compressed_size,
        fmt::format("member {}", e.name).c_str());
    entries.push_back(std::move(e));
    p += 46 + std::uint64_t{name_len} + extra_len + comment_len;
  }
  return entries;
}

std::span<const std::uint8_t> zip_member(
    std::span<const std::uint8_t> bytes,
    const ZipEntry& entry,
    std::vector<std::uint8_t>& scratch,
    const std::string& file) {
  const auto stored = bytes.subspan(entry.data_offset, entry.compressed_size);
  if (entry.method == 0) {
    return stored;
  }
  // Deflate cannot expand more than ~1032:1; a larger claim is corrupt (and
  // must not become a huge allocation).
  if (entry.size / 1032 > entry.compressed_size + 1) {
    corrupt(
        file,
        fmt::format("member {}: implausible size {}", entry.name, entry.size));
  }
  scratch.assign(entry.size, 0);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
    corrupt(file, "zlib could not start");
  }
  z.next_in = const_cast<Bytef*>(stored.data());
  z.avail_in =
      static_cast<uInt>(std::min<std::uint64_t>(stored.size(), 0xFFFFFFFFu));
  z.next_out = scratch.data();
  z.avail_out =
      static_cast<uInt>(std::min<std::uint64_t>(scratch.size(), 0xFFFFFFFFu));
  const int rc = inflate(&z, Z_FINISH);
  const std::uint64_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != entry.size) {
    corrupt(
        file, fmt::format("member {}: corrupt compressed data", entry.name));
  }
  return scratch;
}

} // namespace hotloop::model
