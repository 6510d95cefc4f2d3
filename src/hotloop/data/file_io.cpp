#include "hotloop/data/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// Closes the descriptor on scope exit.
struct Fd {
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
  ~Fd() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

std::vector<std::uint8_t> pread_all(
    const std::string& path,
    int fd,
    std::uint64_t offset,
    std::uint64_t size) {
  std::vector<std::uint8_t> out(size);
  std::uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(
        fd, out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw DataError(
          fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    }
    if (n == 0) {
      throw DataError(
          fmt::format(
              "{}: ends at byte {}, expected {} bytes from offset {}",
              path,
              offset + done,
              size,
              offset),
          "the file changed or was truncated after it was indexed");
    }
    done += static_cast<std::uint64_t>(n);
  }
  return out;
}

Fd open_or_throw(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError(
        fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  return Fd{fd};
}

} // namespace

std::vector<std::uint8_t> read_file(const std::string& path) {
  const Fd f = open_or_throw(path);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    throw DataError(
        fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  return pread_all(path, f.fd, 0, static_cast<std::uint64_t>(st.st_size));
}

std::vector<std::uint8_t> read_file_range(
    const std::string& path,
    std::uint64_t offset,
    std::uint64_t size) {
  const Fd f = open_or_throw(path);
  return pread_all(path, f.fd, offset, size);
}

} // namespace hotloop::data
