#pragma once
// The figures of a run's speed, from its steps' wall times: images/s and the
// step time over the steady state (summary.h's rule), and the share of time
// spent waiting for data. A checkpoint keeps them (progress()), so that a run
// resumed after its last step still reports the speed it trained at.

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/train/summary.h"

namespace hotloop::train {

class StepTimes {
 public:
  void add(double seconds, double data_wait_seconds);
  std::size_t count() const {
    return seconds_.size();
  }
  // Sets s.images_per_s, the step time's median and p90, and the data wait
  // from this process's steps; when it timed none (a run resumed after its
  // last step), from `before` (a checkpoint's progress), naming them in
  // s.from_before_resume.
  void fill(
      TrainSummary& s,
      std::int64_t samples_per_step,
      const nlohmann::json& before) const;
  // The same figures, for a checkpoint.
  nlohmann::json progress(std::int64_t samples_per_step) const;

 private:
  std::vector<double> seconds_;
  double wait_total_ = 0;
  double time_total_ = 0;
};

} // namespace hotloop::train
