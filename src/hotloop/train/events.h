#pragma once
// The loop's events, told to every callback in the order the caller listed
// them (a callback that reads another's figures comes after it).

#include <string>

#include "hotloop/train/callback.h"

namespace hotloop::train {

class Events {
 public:
  explicit Events(Callbacks callbacks) : callbacks_(std::move(callbacks)) {}

  void fit_start(const RunState& s);
  void step_begin(const RunState& s);
  void phase(const RunState& s, Phase p);
  void gradients(const RunState& s);
  void step_end(const RunState& s, const StepEnd& e);
  void loss(const RunState& s, const StepLoss& l);
  void evaluation(const RunState& s, const EvalResult& r);
  void checkpoint(const RunState& s, const std::string& path);
  void oom_recovery(const RunState& s, const OomRecoveryEvent& e);
  // A log line (console callbacks print it on rank 0).
  void message(const RunState& s, const std::string& line);
  // Each callback's figures for summary.json, by name.
  nlohmann::json fit_end(const RunState& s, const TrainSummary& summary);

  const Callbacks& callbacks() const {
    return callbacks_;
  }

 private:
  Callbacks callbacks_;
};

} // namespace hotloop::train
