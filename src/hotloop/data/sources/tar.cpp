#include "hotloop/data/sources/tar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

constexpr std::size_t kBlock = 512;

// Header field offsets and sizes (POSIX ustar).
constexpr std::size_t kName = 0, kNameLen = 100;
constexpr std::size_t kMode = 100;
constexpr std::size_t kSize = 124, kSizeLen = 12;
constexpr std::size_t kMtime = 136;
constexpr std::size_t kChecksum = 148, kChecksumLen = 8;
constexpr std::size_t kType = 156;
constexpr std::size_t kMagic = 257;
constexpr std::size_t kPrefix = 345, kPrefixLen = 155;

std::uint64_t round_up(std::uint64_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}

std::string field(const std::uint8_t* h, std::size_t off, std::size_t len) {
  const auto* p = reinterpret_cast<const char*>(h + off);
  return std::string(p, strnlen(p, len));
}

DataError bad_tar(
    const std::string& name,
    std::uint64_t at,
    const std::string& what) {
  return DataError(
      fmt::format("{}: bad tar header at byte {}: {}", name, at, what),
      "the shard is damaged or truncated: rewrite it (hotloop pack) or remove it");
}

// Octal (space/NUL padded) or base-256 (high bit set, GNU) number.
std::uint64_t parse_number(
    const std::uint8_t* p,
    std::size_t len,
    const std::string& name,
    std::uint64_t at) {
  if ((p[0] & 0x80) != 0) {
    std::uint64_t v = p[0] & 0x7F;
    for (std::size_t i = 1; i < len; ++i) {
      if (v > (~0ULL >> 8)) {
        throw bad_tar(name, at, "size field overflows");
      }
      v = (v << 8) | p[i];
    }
    return v;
  }
  std::uint64_t v = 0;
  std::size_t i = 0;
  while (i < len && p[i] == ' ') {
    ++i;
  }
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v > (~0ULL >> 3)) {
      throw bad_tar(name, at, "size field overflows");
    }
    v = v * 8 + (p[i] - '0');
  }
  for (; i < len; ++i) {
    if (p[i] != ' ' && p[i] != '\0') {
      throw bad_tar(name, at, "a number field holds non-octal characters");
    }
  }
  return v;
}

bool checksum_ok(const std::uint8_t* h, std::uint64_t stored) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    sum += (i >= kChecksum && i < kChecksum + kChecksumLen) ? ' ' : h[i];
  }
  return sum == stored;
}

// The "path" record of a pax extended header ("<len> path=<value>\n" records),
// or "".
std::string pax_path(std::span<const std::uint8_t> data) {
  std::size_t pos = 0;
  while (pos < data.size()) {
    std::size_t len = 0;
    std::size_t i = pos;
    while (i < data.size() && data[i] >= '0' && data[i] <= '9') {
      len = len * 10 + (data[i] - '0');
      ++i;
    }
    if (len == 0 || pos + len > data.size() || i >= data.size() ||
        data[i] != ' ') {
      break;
    }
    const std::string record(
        reinterpret_cast<const char*>(data.data()) + i + 1,
        len - (i + 1 - pos) - 1);
    if (record.rfind("path=", 0) == 0) {
      return record.substr(5);
    }
    pos += len;
  }
  return {};
}

// Walks the headers; `read(offset, size)` returns that span of the archive
// (size checked by the caller).
template <typename Read>
std::vector<TarMember> walk(
    std::uint64_t total,
    Read read,
    const std::string& name) {
  std::vector<TarMember> out;
  std::string
      long_name; // from a GNU 'L' or pax 'x' header, for the next member
  std::uint64_t at = 0;
  while (at + kBlock <= total) {
    const std::vector<std::uint8_t> hv = read(at, kBlock);
    const std::uint8_t* h = hv.data();
    if (std::all_of(h, h + kBlock, [](std::uint8_t b) { return b == 0; })) {
      break; // end-of-archive block
    }
    const std::uint64_t stored =
        parse_number(h + kChecksum, kChecksumLen, name, at);
    if (!checksum_ok(h, stored)) {
      throw bad_tar(name, at, "checksum mismatch");
    }
    const std::uint64_t size = parse_number(h + kSize, kSizeLen, name, at);
    const std::uint64_t data_at = at + kBlock;
    if (size > total - data_at) {
      throw bad_tar(
          name,
          at,
          fmt::format(
              "member of {} bytes runs past the end of the file ({} bytes): truncated",
              size,
              total));
    }
    const char type = static_cast<char>(h[kType]);
    if (type == 'L' || type == 'x') {
      if (size > (1u << 20)) {
        throw bad_tar(name, at, "extended header larger than 1 MiB");
      }
      const std::vector<std::uint8_t> data = read(data_at, size);
      long_name = type == 'L'
          ? std::string(
                reinterpret_cast<const char*>(data.data()),
                strnlen(
                    reinterpret_cast<const char*>(data.data()), data.size()))
          : pax_path(data);
    } else if (type == '0' || type == '\0' || type == '7') {
      std::string member = long_name;
      if (member.empty()) {
        member = field(h, kName, kNameLen);
        const std::string prefix = std::memcmp(h + kMagic, "ustar", 5) == 0
            ? field(h, kPrefix, kPrefixLen)
            : std::string();
        if (!prefix.empty()) {
          member = prefix + "/" + member;
        }
      }
      out.push_back({member, data_at, size});
      long_name.clear();
    } else {
      long_name.clear(); // directories, links, global pax headers: not samples
    }
    at = data_at + round_up(size);
  }
  return out;
}

void octal(char* dst, std::size_t len, std::uint64_t v) {
  std::snprintf(
      dst,
      len,
      "%0*llo",
      static_cast<int>(len - 1),
      static_cast<unsigned long long>(v));
}

} // namespace

std::vector<TarMember> list_tar(
    std::span<const std::uint8_t> bytes,
    const std::string& name) {
  return walk(
      bytes.size(),
      [&](std::uint64_t off, std::uint64_t n) {
        return std::vector<std::uint8_t>(
            bytes.begin() + static_cast<std::ptrdiff_t>(off),
            bytes.begin() + static_cast<std::ptrdiff_t>(off + n));
      },
      name);
}

std::vector<TarMember> list_tar_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError(
        fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() {
      ::close(fd);
    }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw DataError(
        fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  const auto read = [&](std::uint64_t off, std::uint64_t n) {
    std::vector<std::uint8_t> buf(n);
    std::uint64_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(
          fd, buf.data() + done, n - done, static_cast<off_t>(off + done));
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got <= 0) {
        throw DataError(
            fmt::format("{}: read failed at byte {}", path, off + done));
      }
      done += static_cast<std::uint64_t>(got);
    }
    return buf;
  };
  return walk(static_cast<std::uint64_t>(st.st_size), read, path);
}

TarWriter::TarWriter(const std::string& path)
    : path_(path), file_(std::fopen(path.c_str(), "wb")) {
  if (file_ == nullptr) {
    throw DataError(
        fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  }
}

TarWriter::~TarWriter() {
  if (file_ != nullptr) {
    try {
      close();
    } catch (...) {
      // A destructor must not throw; close() explicitly to see write errors.
    }
  }
}

void TarWriter::write(const void* data, std::size_t size) {
  if (size == 0) {
    return; // an empty member's data may be a null pointer, which fwrite must
            // not get
  }
  if (std::fwrite(data, 1, size, file_) != size) {
    throw DataError(
        fmt::format("{}: write failed: {}", path_, std::strerror(errno)),
        "check free disk space");
  }
  written_ += size;
}

void TarWriter::add(
    const std::string& name,
    std::span<const std::uint8_t> data) {
  std::uint8_t h[kBlock] = {};
  std::string base = name;
  std::string prefix;
  if (name.size() >= kNameLen) {
    const auto slash = name.rfind('/', kPrefixLen);
    if (slash == std::string::npos || name.size() - slash - 1 >= kNameLen) {
      throw DataError(fmt::format(
          "{}: member name '{}' is too long for ustar", path_, name));
    }
    prefix = name.substr(0, slash);
    base = name.substr(slash + 1);
  }
  std::memcpy(h + kName, base.data(), base.size());
  std::memcpy(h + kPrefix, prefix.data(), prefix.size());
  octal(reinterpret_cast<char*>(h + kMode), 8, 0644);
  octal(reinterpret_cast<char*>(h + 108), 8, 0); // uid
  octal(reinterpret_cast<char*>(h + 116), 8, 0); // gid
  octal(reinterpret_cast<char*>(h + kSize), kSizeLen, data.size());
  octal(reinterpret_cast<char*>(h + kMtime), 12, 0);
  h[kType] = '0';
  std::memcpy(
      h + kMagic,
      "ustar\0"
      "00",
      8);
  std::memset(h + kChecksum, ' ', kChecksumLen);
  std::uint64_t sum = 0;
  for (std::uint8_t b : h) {
    sum += b;
  }
  std::snprintf(
      reinterpret_cast<char*>(h + kChecksum),
      7,
      "%06llo",
      static_cast<unsigned long long>(sum));
  h[kChecksum + 7] = ' ';
  write(h, kBlock);
  write(data.data(), data.size());
  static const std::uint8_t zeros[kBlock] = {};
  write(zeros, round_up(data.size()) - data.size());
}

void TarWriter::close() {
  if (file_ == nullptr) {
    return;
  }
  static const std::uint8_t zeros[2 * kBlock] = {};
  std::FILE* f = file_;
  try {
    write(zeros, sizeof(zeros));
  } catch (...) {
    std::fclose(f);
    file_ = nullptr;
    throw;
  }
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    throw DataError(
        fmt::format("{}: close failed: {}", path_, std::strerror(errno)),
        "check free disk space");
  }
}

} // namespace hotloop::data
