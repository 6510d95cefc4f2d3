#pragma once
// A time budget: once `seconds` have passed since the run started, the run
// is asked to stop after the step, as SIGTERM would ask it (the flag the
// caller passes to Trainer::fit; the run then checkpoints where it writes
// checkpoints and returns with stopped_early). `hotloop bench` cuts its CPU
// rows with it.

#include <atomic>
#include <chrono>

#include "hotloop/train/callback.h"

namespace hotloop::train {

class TimeBudget final : public Callback {
 public:
  TimeBudget(double seconds, std::atomic<bool>& stop)
      : seconds_(seconds), stop_(&stop) {}

  std::string name() const override {
    return "time-budget";
  }
  nlohmann::json config() const override {
    return {{"seconds", seconds_}};
  }
  void on_fit_start(const RunState&) override {
    start_ = std::chrono::steady_clock::now();
  }
  void on_step_end(const RunState&, const StepEnd&) override {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count() >= seconds_) {
      stop_->store(true);
    }
  }

 private:
  double seconds_;
  std::atomic<bool>* stop_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace hotloop::train
