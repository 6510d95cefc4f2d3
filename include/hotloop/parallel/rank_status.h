#pragma once
// What each rank of a data-parallel job is doing, published so that a
// failure can name the rank that stopped and its last phase. The trainer
// sets (step, phase) with two relaxed stores; a thread publishes them twice a
// second to the job's store ("status/<rank>") and, under `hotloop launch`,
// to the file named by HOTLOOP_RANK_STATUS_FILE, which the launcher reads
// when a rank dies. Nothing is sent per step.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "hotloop/core/phase.h"

namespace c10d {
class Store;
}

namespace hotloop::parallel {

// One rank's last report, as published: "<unix ms> <step> <phase>".
struct RankReport {
  std::int64_t unix_ms = 0;
  std::int64_t step = 0;
  std::string phase;
};
std::string format_report(const RankReport& r);
std::optional<RankReport> parse_report(const std::string& text);
// "step 12, backward, 0.4 s before" (relative to `now_ms`).
std::string describe_report(const RankReport& r, std::int64_t now_ms);

std::int64_t unix_ms_now();

class RankStatus {
 public:
  // `store` may be null (no store: the file only); `file` may be empty.
  RankStatus(
      int rank,
      c10::intrusive_ptr<c10d::Store> store,
      std::string file,
      std::chrono::milliseconds interval = std::chrono::milliseconds(500));
  ~RankStatus();
  RankStatus(const RankStatus&) = delete;
  RankStatus& operator=(const RankStatus&) = delete;

  void set(std::int64_t step, Phase phase) {
    step_.store(step, std::memory_order_relaxed);
    phase_.store(static_cast<int>(phase), std::memory_order_relaxed);
  }
  void set_phase(Phase phase) {
    phase_.store(static_cast<int>(phase), std::memory_order_relaxed);
  }

  // After a collective failed: which of the `world_size` ranks stopped
  // reporting, or are stuck. Watches every rank's report for about three
  // intervals and names those whose reports did not move (the process is
  // gone) and those that still report but whose step and phase did not move
  // and that did not see the failure (alive, hanging outside the
  // collective), each with its last step and phase. Never throws: a store
  // that is gone (rank 0 died) is said so.
  std::string describe_peers(int world_size);

 private:
  void publish();
  void run();

  int rank_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string file_;
  std::chrono::milliseconds interval_;
  std::atomic<std::int64_t> step_{0};
  std::atomic<int> phase_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace hotloop::parallel
