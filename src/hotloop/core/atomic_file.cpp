#include "hotloop/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw DataError(
      fmt::format("cannot write {}: {} ({})", path, what, std::strerror(err)),
      "check that the folder exists, is writable and has free space");
}

// Closes the descriptor and removes the temporary file unless committed.
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    if (!committed_) {
      ::unlink(path_.c_str());
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const {
    return fd_;
  }
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void commit() {
    committed_ = true;
  }

 private:
  std::string path_;
  int fd_;
  bool committed_ = false;
};

} // namespace

void write_file_atomic(
    const std::string& path,
    const std::vector<std::span<const std::uint8_t>>& parts,
    const std::function<void()>& before_commit) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder =
      target.has_parent_path() ? target.parent_path() : ".";
  std::string tmp_path =
      fmt::format("{}/.{}.XXXXXX", folder.string(), target.filename().string());
  const int fd = ::mkstemp(tmp_path.data());
  if (fd < 0) {
    fail(path, "cannot create a temporary file beside it", errno);
  }
  TempFile tmp(tmp_path, fd);
  for (const auto& part : parts) {
    std::size_t done = 0;
    while (done < part.size()) {
      const ssize_t n =
          ::write(tmp.fd(), part.data() + done, part.size() - done);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        fail(path, "write failed", errno);
      }
      done += static_cast<std::size_t>(n);
    }
  }
  if (::fchmod(tmp.fd(), 0644) != 0 || ::fsync(tmp.fd()) != 0) {
    fail(path, "fsync failed", errno);
  }
  if (tmp.close() != 0) {
    fail(path, "close failed", errno);
  }
  if (before_commit) {
    before_commit();
  }
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
    fail(path, "rename failed", errno);
  }
  tmp.commit();
  // The rename itself is durable once the folder is synced.
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_text_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(
      path,
      {std::span<const std::uint8_t>(
          reinterpret_cast<const std::uint8_t*>(text.data()), text.size())});
}

} // namespace hotloop
