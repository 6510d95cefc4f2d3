#pragma once
// SIGINT/SIGTERM/SIGHUP read from a file descriptor: `hotloop watch` polls
// it beside the job's pidfd and the step FIFO, so a signal wakes the loop
// instead of interrupting it.

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <optional>
#include <utility>

namespace hotloop::watch {

// Blocks SIGINT/SIGTERM/SIGHUP for this thread (and the threads it starts)
// and reads them from a signalfd instead; restores the mask when done.
class SignalFd {
 public:
  SignalFd() {
    sigemptyset(&set_);
    for (const int s : {SIGINT, SIGTERM, SIGHUP}) {
      sigaddset(&set_, s);
    }
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
    fd_ = ::signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
  }
  ~SignalFd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    // Signals that arrived after the last read are dropped, not delivered
    // with their default action once unblocked.
    timespec zero{};
    siginfo_t info{};
    while (::sigtimedwait(&set_, &info, &zero) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;
  int fd() const {
    return fd_;
  }
  // The next signal, with whether a process sent it (kill) rather than the
  // terminal (Ctrl-C reaches the whole foreground group by itself).
  std::optional<std::pair<int, bool>> next() {
    signalfd_siginfo info{};
    if (::read(fd_, &info, sizeof info) != sizeof info) {
      return std::nullopt;
    }
    return std::make_pair(
        static_cast<int>(info.ssi_signo),
        info.ssi_code == SI_USER || info.ssi_code == SI_QUEUE);
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
  int fd_ = -1;
};

} // namespace hotloop::watch
