#pragma once
// Progress for long work on standard error: a bar redrawn in place on a
// terminal, a line every 10% otherwise (logs and CI stay readable).

#include <chrono>
#include <cstdint>
#include <string>

namespace hotloop {

class Progress {
 public:
  Progress(std::string what, std::uint64_t total, bool enabled = true);
  // Sets the count done and an extra note ("3 shards"); redraws at most 10
  // times a second.
  void update(std::uint64_t done, const std::string& note = {});
  // Draws the final state and ends the line.
  void finish(const std::string& note = {});

 private:
  void draw(std::uint64_t done, const std::string& note, bool final);
  std::string what_;
  std::uint64_t total_;
  bool enabled_;
  bool tty_;
  std::uint64_t last_decile_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

} // namespace hotloop
