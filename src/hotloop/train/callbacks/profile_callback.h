#pragma once
// `--profile`: LibTorch's profiler (telemetry/profiler.h) over chosen steps,
// each recording saved as a Chrome trace that Perfetto and TensorBoard's
// profiler open: RUN/profile/steps-A-B.pt.trace.json (-rankR with several
// ranks). Inside a recording each step is a "hotloop::step N" range and each
// of its phases a "hotloop::forward" (backward, optimizer, ...) range.
// - "A-B" (or "N"): those steps, once.
// - "auto": a few steps after a step took slow_factor x the median step so
//   far, or after the diagnosis first turned from healthy; at most one
//   recording per auto_every_s, and none after max_total_bytes of traces.
// A run without --profile does not have this callback: no profiler state.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/record_function.h>

#include "hotloop/telemetry/profiler.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/standard_callbacks.h"

namespace hotloop::train {

class ProfileCallback final : public Callback {
 public:
  // For "auto": after each step, the verdict of the diagnosis window that
  // step closed, or nothing when it closed none (in a run: the telemetry
  // callback's windows).
  using VerdictSource = std::function<std::optional<std::string>()>;

  // `verdicts` may be empty: then only slow steps start a recording.
  ProfileCallback(ProfileOptions options, VerdictSource verdicts);
  ~ProfileCallback() override;

  std::string name() const override {
    return "profile";
  }
  nlohmann::json config() const override;
  void on_fit_start(const RunState& s) override;
  void on_step_begin(const RunState& s) override;
  void on_phase(const RunState& s, Phase p) override;
  void on_step_end(const RunState& s, const StepEnd& e) override;
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary& summary)
      override;

 private:
  struct Trace {
    std::int64_t first = 0;
    std::int64_t last = 0;
    std::string reason;
    telemetry::ProfileSummary summary;
  };
  void start(const RunState& s, std::int64_t first, std::int64_t last);
  void stop(const RunState& s);

  ProfileOptions options_;
  VerdictSource verdicts_;
  std::int64_t first_ = 0; // the explicit range; 0: auto
  std::int64_t last_ = 0;
  bool is_auto_ = false;
  std::unique_ptr<telemetry::ProfileRecording> recording_;
  Trace current_;
  std::vector<Trace> traces_;
  std::uint64_t total_bytes_ = 0;
  // auto: a reason to record the next steps, the step times seen, the last
  // verdict, and when the last automatic recording began.
  std::optional<std::string> pending_;
  std::deque<double> seconds_;
  std::string verdict_ = "healthy";
  double last_auto_s_ = -1;
  double clock_s_ = 0; // the run's time, as the steps' wall times add up
  // The open ranges and their names (a range refers to its name until it
  // ends).
  std::string step_name_;
  std::string phase_name_;
  std::unique_ptr<at::RecordFunction> step_range_;
  std::unique_ptr<at::RecordFunction> phase_range_;
};

} // namespace hotloop::train
