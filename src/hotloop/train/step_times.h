#pragma once
// The figures of a run's speed: images/s and the step time over the steady
// state (summary.h's rule), and the share of time spent waiting for data.
// On the CPU they come from the steps' wall times (the host runs the work).
// On a GPU the host only queues it (a graph replay in microseconds, many
// steps ahead of the device), so each step is also timed on the training
// stream with CUDA events (use_device_clock): images/s is the steady-state
// samples over the GPU time those steps took, and the step times are the
// GPU's. summary.json's step_time_ms.clock says which clock it was. A
// checkpoint keeps the figures (progress()), so that a run resumed after its
// last step still reports the speed it trained at.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/cuda/gpu_timer.h"
#include "hotloop/train/summary.h"

namespace hotloop::train {

class StepTimes {
 public:
  StepTimes();
  ~StepTimes();
  StepTimes(StepTimes&&) noexcept;
  StepTimes& operator=(StepTimes&&) noexcept;

  // Times each step on the device too (a GpuTimer with one label, on the
  // training stream's events).
  void use_device_clock(std::unique_ptr<cuda::GpuTimer> clock);
  // The step's work starts being queued (its first event on the device).
  void begin_step();
  // The step ended on the host after `seconds`, `data_wait_seconds` of them
  // waiting for data (its last event on the device).
  void add(double seconds, double data_wait_seconds);
  std::size_t count() const {
    return seconds_.size();
  }
  // Sets s.images_per_s, the step time's median and p90, the data wait and
  // the clock from this process's steps (waiting for the device's last
  // steps); when it timed none (a run resumed after its last step), from
  // `before` (a checkpoint's progress), naming them in s.from_before_resume.
  void fill(
      TrainSummary& s,
      std::int64_t samples_per_step,
      const nlohmann::json& before);
  // The same figures, for a checkpoint.
  nlohmann::json progress(std::int64_t samples_per_step);

 private:
  void collect(const std::vector<cuda::TimedStep>& done);

  std::vector<double> seconds_; // the host's
  std::vector<double> device_seconds_; // the device's, in step order
  std::unique_ptr<cuda::GpuTimer> device_clock_;
  double wait_total_ = 0;
  double time_total_ = 0;
};

} // namespace hotloop::train
