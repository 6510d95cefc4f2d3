#include "hotloop/train/callbacks/prometheus_callback.h"

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/telemetry/prometheus.h"

namespace hotloop::train {

PrometheusCallback::PrometheusCallback(
    int port,
    std::shared_ptr<const TelemetryCallback> telemetry)
    : port_(port), telemetry_(std::move(telemetry)) {}

void PrometheusCallback::on_fit_start(const RunState& s) {
  if (s.rank == 0 && port_ > 0) {
    server_ = std::make_unique<telemetry::MetricsServer>(port_);
  }
}

void PrometheusCallback::on_loss(const RunState&, const StepLoss& l) {
  last_loss_ = l.loss;
}

void PrometheusCallback::on_step_end(const RunState& s, const StepEnd& e) {
  if (!server_) {
    return;
  }
  const telemetry::RunTelemetry* t = telemetry_ ? telemetry_->run() : nullptr;
  std::optional<telemetry::Sample> sample;
  std::optional<telemetry::Diagnosis> diagnosis;
  if (t != nullptr) {
    const std::size_t taken = t->samples_taken();
    if (taken == samples_published_ && !telemetry_->last_step().window) {
      return;
    }
    samples_published_ = taken;
    sample = t->latest_sample();
    diagnosis = t->last_diagnosis();
  }
  const int index = std::max<int>(0, s.device.index());
  server_->publish(telemetry::prometheus_text(
      {s.step,
       last_loss_,
       e.lr,
       e.seconds,
       static_cast<double>(e.samples) / e.seconds,
       static_cast<double>(e.samples * s.model->tokens_per_sample()) /
           e.seconds},
      sample,
      diagnosis,
      s.device.is_cuda() ? cuda::memory_stats(index) : cuda::MemoryStats{},
      s.device.is_cuda()));
}

} // namespace hotloop::train
