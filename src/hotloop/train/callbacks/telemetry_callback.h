#pragma once
// Telemetry as a callback: times each step's phases (CPU clocks; on a GPU,
// CUDA events read once each step's have completed), runs the NVML/host sampler
// (telemetry.jsonl on rank 0), and diagnoses every window of steps, logging a
// verdict when it changes. The callbacks after it in the list that report
// telemetry's figures (metrics file, TensorBoard, Prometheus, bench) read them
// here.

#include <functional>
#include <memory>
#include <string>

#include "hotloop/telemetry/run_telemetry.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/standard_callbacks.h"

namespace hotloop::train {

class TelemetryCallback final : public Callback {
 public:
  explicit TelemetryCallback(TelemetryOptions options);
  ~TelemetryCallback() override;

  std::string name() const override {
    return "telemetry";
  }
  nlohmann::json config() const override;
  void on_fit_start(const RunState& s) override;
  void on_step_begin(const RunState& s) override;
  void on_phase(const RunState& s, Phase p) override;
  void on_step_end(const RunState& s, const StepEnd& e) override;
  void on_loss(const RunState& s, const StepLoss& l) override;
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary& summary)
      override;

  // The latest step's phases and, at a window's end, its metrics line.
  const telemetry::StepOutput& last_step() const {
    return last_;
  }
  // The running telemetry (samples, diagnosis); null before the run starts.
  const telemetry::RunTelemetry* run() const {
    return run_.get();
  }
  // For a loop that times a phase itself (train/loop_run.h).
  telemetry::RunTelemetry* run() {
    return run_.get();
  }

 private:
  TelemetryOptions options_;
  std::unique_ptr<telemetry::RunTelemetry> run_;
  telemetry::StepOutput last_;
};

} // namespace hotloop::train
