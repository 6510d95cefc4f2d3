#pragma once
// metrics.jsonl (rank 0): a line per step (lr, step time, images/s, data
// wait, its phases, the loss and gradient norm once read back), per
// evaluation, per diagnosis window and per OOM recovery, in step order. A
// step's line waits for its loss (up to --readback-every steps on a GPU),
// and the lines behind it wait with it. A resumed run drops the lines after
// its checkpoint (a timeline being replayed) and continues the file.

#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <string>

#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/telemetry_callback.h"

namespace hotloop::train {

class MetricsFile final : public Callback {
 public:
  // `telemetry` (may be null): the phases and diagnosis windows come from
  // it; it must come before this callback in the list.
  explicit MetricsFile(std::shared_ptr<const TelemetryCallback> telemetry);

  std::string name() const override {
    return "metrics";
  }
  void on_fit_start(const RunState& s) override;
  void on_phase(const RunState& s, Phase p) override;
  void on_step_end(const RunState& s, const StepEnd& e) override;
  void on_loss(const RunState& s, const StepLoss& l) override;
  void on_evaluation(const RunState& s, const EvalResult& r) override;
  void on_oom_recovery(const RunState& s, const OomRecoveryEvent& e) override;
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary& summary)
      override;

 private:
  struct Pending {
    nlohmann::json line;
    std::int64_t step = 0;
    bool needs_loss = false;
  };
  void write_ready();

  std::shared_ptr<const TelemetryCallback> telemetry_;
  std::ofstream out_;
  std::deque<Pending> pending_;
};

} // namespace hotloop::train
