#pragma once
// A full disk on demand: while one of these lives, this process cannot grow a
// file past `bytes` (RLIMIT_FSIZE, which binds root too), so a write fails
// with EFBIG part-way through, after its file exists. SIGXFSZ, which would
// kill the process, is ignored meanwhile. Each ctest test is its own
// process, so the limit touches no other test.

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <stdexcept>

namespace hotloop::test {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(std::uint64_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &old_) != 0) {
      throw std::runtime_error("getrlimit(RLIMIT_FSIZE) failed");
    }
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      throw std::runtime_error("setrlimit(RLIMIT_FSIZE) failed");
    }
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

} // namespace hotloop::test
