#include "hotloop/core/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace hotloop {

Progress::Progress(std::string what, std::uint64_t total, bool enabled)
    : what_(std::move(what)),
      total_(total),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::update(std::uint64_t done, const std::string& note) {
  if (!enabled_) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ >= std::chrono::milliseconds(100)) {
      last_draw_ = now;
      draw(done, note, false);
    }
  } else if (total_ > 0) {
    const std::uint64_t decile = done * 10 / total_;
    if (decile > last_decile_ && decile < 10) {
      last_decile_ = decile;
      draw(done, note, false);
    }
  }
}

void Progress::finish(const std::string& note) {
  if (enabled_) {
    draw(total_, note, true);
  }
}

void Progress::draw(std::uint64_t done, const std::string& note, bool final) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  const double frac = total_ > 0
      ? static_cast<double>(done) / static_cast<double>(total_)
      : 1.0;
  const int width = 30;
  const int filled = static_cast<int>(frac * width);
  const std::string bar =
      std::string(filled, '#') + std::string(width - filled, '.');
  std::string eta;
  if (!final && rate > 0 && done < total_) {
    const auto left =
        static_cast<std::uint64_t>(static_cast<double>(total_ - done) / rate);
    eta = left >= 60 ? fmt::format(", ETA {}m{:02d}s", left / 60, left % 60)
                     : fmt::format(", ETA {}s", left);
  }
  const std::string line = fmt::format(
      "{} [{}] {}/{} ({:.0f}/s){}{}{}",
      what_,
      bar,
      done,
      total_,
      rate,
      note.empty() ? "" : ", ",
      note,
      eta);
  if (tty_) {
    fmt::print(stderr, "\r{}\033[K{}", line, final ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

} // namespace hotloop
