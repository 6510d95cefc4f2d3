#pragma once
// Prometheus metrics on 127.0.0.1:PORT (rank 0): the step, loss, learning
// rate and images/s, the allocator's memory on a GPU, and from telemetry
// (when it runs before this callback) the GPUs' samples and the latest
// verdict. The text is rebuilt when the sampler has a new sample (about
// 1 Hz, far above any scrape rate), at a diagnosis window's end, or, without
// telemetry, at every step.

#include <cmath>
#include <memory>
#include <string>

#include "hotloop/telemetry/metrics_server.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/telemetry_callback.h"

namespace hotloop::train {

class PrometheusCallback final : public Callback {
 public:
  PrometheusCallback(
      int port,
      std::shared_ptr<const TelemetryCallback> telemetry);

  std::string name() const override {
    return "prometheus";
  }
  nlohmann::json config() const override {
    return {{"port", port_}};
  }
  void on_fit_start(const RunState& s) override;
  void on_step_end(const RunState& s, const StepEnd& e) override;
  void on_loss(const RunState& s, const StepLoss& l) override;

 private:
  int port_;
  std::shared_ptr<const TelemetryCallback> telemetry_;
  std::unique_ptr<telemetry::MetricsServer> server_;
  std::size_t samples_published_ = 0;
  double last_loss_ = 0;
};

} // namespace hotloop::train
