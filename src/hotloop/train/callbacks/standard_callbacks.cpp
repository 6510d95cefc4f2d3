#include "hotloop/train/callbacks/standard_callbacks.h"

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/train/callbacks/console_log.h"
#include "hotloop/train/callbacks/metrics_file.h"
#include "hotloop/train/callbacks/profile_callback.h"
#include "hotloop/train/callbacks/prometheus_callback.h"
#include "hotloop/train/callbacks/telemetry_callback.h"
#include "hotloop/train/callbacks/tensorboard_callback.h"

namespace hotloop::train {

void CallbackOptions::validate() const {
  if (telemetry.interval_s <= 0) {
    throw UsageError(
        "telemetry-interval: must be positive (seconds between samples)");
  }
  if (telemetry.diagnosis_window < 1) {
    throw UsageError("diagnosis-window: must be at least 1 step");
  }
  if (metrics_port < 0 || metrics_port > 65535) {
    throw UsageError(
        fmt::format("metrics-port: {} is not a port (0: off)", metrics_port));
  }
  profile.validate();
  if (console.log_every_s < 0) {
    throw UsageError("log-every: is negative (0: no progress lines)");
  }
}

Callbacks standard_callbacks(const CallbackOptions& o) {
  o.validate();
  Callbacks out;
  // Telemetry first: the callbacks after it report its figures.
  std::shared_ptr<TelemetryCallback> telemetry;
  if (o.telemetry.enabled) {
    telemetry = std::make_shared<TelemetryCallback>(o.telemetry);
    out.push_back(telemetry);
  }
  if (!o.profile.steps.empty()) {
    ProfileCallback::VerdictSource verdicts;
    if (telemetry) {
      verdicts = [telemetry]() -> std::optional<std::string> {
        const auto& window = telemetry->last_step().window;
        if (!window || !window->contains("diagnosis")) {
          return std::nullopt;
        }
        return (*window)["diagnosis"].value("verdict", std::string("healthy"));
      };
    }
    out.push_back(std::make_shared<ProfileCallback>(o.profile, verdicts));
  }
  if (o.metrics_file) {
    out.push_back(std::make_shared<MetricsFile>(telemetry));
  }
  if (o.tensorboard) {
    out.push_back(std::make_shared<TensorBoardCallback>(telemetry));
  }
  if (o.metrics_port > 0) {
    out.push_back(
        std::make_shared<PrometheusCallback>(o.metrics_port, telemetry));
  }
  if (o.console.enabled) {
    out.push_back(std::make_shared<ConsoleLog>(o.console));
  }
  return out;
}

} // namespace hotloop::train
