#include "hotloop/watch/step_channel.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"

namespace hotloop::watch {

namespace {

std::optional<double> number(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0' && std::isfinite(v)
      ? std::optional<double>(v)
      : std::nullopt;
}

std::optional<StepEvent> from_values(
    std::map<std::string, double> values,
    double received) {
  const auto step = values.find("step");
  if (step == values.end() || step->second < 0 ||
      step->second != std::floor(step->second)) {
    return std::nullopt;
  }
  StepEvent e;
  e.step = static_cast<std::int64_t>(step->second);
  values.erase(step);
  e.unix_time = received;
  if (const auto t = values.find("time"); t != values.end()) {
    e.unix_time = t->second;
    values.erase(t);
  }
  if (const auto r = values.find("rank"); r != values.end()) {
    e.rank = static_cast<int>(r->second);
    values.erase(r);
  }
  e.values = std::move(values);
  return e;
}

} // namespace

std::optional<StepEvent> parse_step_line(
    const std::string& line,
    double received) {
  std::string text = line;
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  std::map<std::string, double> values;
  if (!text.empty() && text.front() == '{') {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return std::nullopt;
    }
    for (const auto& [k, v] : j.items()) {
      if (v.is_number()) {
        values[k] = v.get<double>();
      }
    }
    return from_values(std::move(values), received);
  }
  std::istringstream in(text);
  for (std::string pair; in >> pair;) {
    if (pair.back() == ',') {
      pair.pop_back();
    }
    const auto eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return std::nullopt;
    }
    const auto v = number(pair.substr(eq + 1));
    if (v) {
      values[pair.substr(0, eq)] = *v;
    } else if (pair.substr(0, eq) == "step") {
      return std::nullopt;
    }
  }
  return from_values(std::move(values), received);
}

StepChannel::StepChannel(std::string path) : path_(std::move(path)) {
  ::unlink(path_.c_str());
  if (::mkfifo(path_.c_str(), 0600) != 0) {
    throw DataError(
        fmt::format(
            "watch: cannot make the step FIFO {}: {}",
            path_,
            std::strerror(errno)),
        "the run folder must be on a local file system that allows FIFOs (not a network share); pick another with --out");
  }
  read_fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  write_fd_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (read_fd_ < 0 || write_fd_ < 0) {
    const std::string why = std::strerror(errno);
    ::unlink(path_.c_str());
    throw DataError(
        fmt::format("watch: cannot open the step FIFO {}: {}", path_, why),
        "pick another run folder with --out");
  }
}

StepChannel::~StepChannel() {
  for (const int fd : {read_fd_, write_fd_}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  ::unlink(path_.c_str());
}

std::vector<StepEvent> StepChannel::drain(double now) {
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n <= 0) {
      break;
    }
    partial_.append(buf, static_cast<std::size_t>(n));
  }
  std::vector<StepEvent> events;
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    const std::string line = partial_.substr(start, nl - start);
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    if (auto e = parse_step_line(line, now)) {
      events.push_back(std::move(*e));
    } else if (bad_lines_++ == 0) {
      first_bad_ = line.substr(0, 200);
    }
  }
  partial_.erase(0, start);
  if (partial_.size() > 65536) { // a writer that never ends its line
    ++bad_lines_;
    partial_.clear();
  }
  return events;
}

std::string rendezvous_dir() {
  return fmt::format("/tmp/hotloop-watch-{}", ::geteuid());
}

std::string rendezvous_path(int pid) {
  return fmt::format("{}/{}", rendezvous_dir(), pid);
}

StepRendezvous::StepRendezvous(
    int pid,
    const std::string& fifo,
    const std::string& dir)
    : path_(fmt::format("{}/{}", dir, pid)), fifo_(fifo) {
  const std::string fix = fmt::format(
      "remove {} (watch makes it again, private to you), or report steps by starting the job under watch",
      dir);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw DataError(
        fmt::format("watch: cannot make {}: {}", dir, std::strerror(errno)),
        fix);
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    throw DataError(
        fmt::format(
            "watch: {} is not a private folder of yours: the job's steps could be read or planted by others",
            dir),
        fix);
  }
  // A live watch holds its FIFO's read end, so a writer can open it; a link
  // left by a watch that was killed leads nowhere or to a FIFO nobody reads.
  const int probe = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (probe >= 0) {
    struct stat ps {};
    const bool read = ::fstat(probe, &ps) == 0 && S_ISFIFO(ps.st_mode);
    ::close(probe);
    if (read) {
      std::error_code ec;
      throw DataError(
          fmt::format(
              "watch: another watch of pid {} receives its steps ({} -> {})",
              pid,
              path_,
              std::filesystem::read_symlink(path_, ec).string()),
          "stop that watch first, or leave the steps to it");
    }
  }
  ::unlink(path_.c_str()); // a stale link
  if (::symlink(fifo_.c_str(), path_.c_str()) != 0) {
    throw DataError(
        fmt::format(
            "watch: cannot link {} to {}: {}",
            path_,
            fifo_,
            std::strerror(errno)),
        fix);
  }
}

StepRendezvous::~StepRendezvous() {
  std::error_code ec;
  if (std::filesystem::read_symlink(path_, ec).string() == fifo_ && !ec) {
    ::unlink(path_.c_str());
  }
}

} // namespace hotloop::watch
