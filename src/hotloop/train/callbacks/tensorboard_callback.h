#pragma once
// TensorBoard event files in the run directory (rank 0): each step's
// learning rate, images/s and step time, its loss once read back, and from
// telemetry (when it runs before this callback) the step's phases and each
// new GPU/host sample.

#include <memory>
#include <string>

#include "hotloop/telemetry/tensorboard.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/telemetry_callback.h"

namespace hotloop::train {

class TensorBoardCallback final : public Callback {
 public:
  explicit TensorBoardCallback(
      std::shared_ptr<const TelemetryCallback> telemetry);

  std::string name() const override {
    return "tensorboard";
  }
  void on_fit_start(const RunState& s) override;
  void on_step_end(const RunState& s, const StepEnd& e) override;
  void on_loss(const RunState& s, const StepLoss& l) override;
  void on_evaluation(const RunState& s, const EvalResult& r) override;
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary& summary)
      override;

 private:
  std::shared_ptr<const TelemetryCallback> telemetry_;
  std::unique_ptr<telemetry::TensorBoardWriter> writer_;
  std::size_t samples_seen_ = 0;
};

} // namespace hotloop::train
