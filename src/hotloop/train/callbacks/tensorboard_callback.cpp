#include "hotloop/train/callbacks/tensorboard_callback.h"

#include <fmt/format.h>

namespace hotloop::train {

TensorBoardCallback::TensorBoardCallback(
    std::shared_ptr<const TelemetryCallback> telemetry)
    : telemetry_(std::move(telemetry)) {}

void TensorBoardCallback::on_fit_start(const RunState& s) {
  if (s.rank == 0 && !s.run_dir.empty()) {
    writer_ = std::make_unique<telemetry::TensorBoardWriter>(s.run_dir);
  }
}

void TensorBoardCallback::on_step_end(const RunState& s, const StepEnd& e) {
  if (!writer_) {
    return;
  }
  std::vector<std::pair<std::string, double>> v = {
      {"train/lr", e.lr},
      {"train/images_per_s", static_cast<double>(e.samples) / e.seconds},
      {"train/step_time_ms", e.seconds * 1e3}};
  if (const std::int64_t tokens = s.model->tokens_per_sample(); tokens > 0) {
    v.emplace_back(
        "train/tokens_per_s",
        static_cast<double>(e.samples * tokens) / e.seconds);
  }
  if (s.flops_per_sample > 0) {
    const double flops_per_s =
        static_cast<double>(e.samples) * s.flops_per_sample / e.seconds;
    v.emplace_back("train/model_tflops", flops_per_s / 1e12);
    if (s.peak_flops_per_s > 0) {
      v.emplace_back("train/mfu", flops_per_s / s.peak_flops_per_s);
    }
  }
  const telemetry::RunTelemetry* t = telemetry_ ? telemetry_->run() : nullptr;
  if (t != nullptr) {
    const auto& phases = telemetry_->last_step().phases_ms;
    if (phases.is_object()) {
      for (const auto& [name, ms] : phases.items()) {
        v.emplace_back(fmt::format("phases/{}_ms", name), ms.get<double>());
      }
    }
    const std::size_t taken = t->samples_taken();
    if (taken != samples_seen_) {
      samples_seen_ = taken;
      if (const auto sample = t->latest_sample()) {
        for (const auto& g : sample->gpus) {
          const std::string p = fmt::format("gpu{}/", g.index);
          v.emplace_back(p + "util_percent", g.util_percent.value_or(0));
          v.emplace_back(
              p + "memory_used_gib",
              static_cast<double>(g.memory_used_bytes.value_or(0)) /
                  (1ull << 30));
          v.emplace_back(p + "temperature_c", g.temperature_c.value_or(0));
          v.emplace_back(p + "power_w", g.power_w.value_or(0));
          if (g.gpm) {
            for (const auto& [name, value] :
                 {std::pair{"sm_active_percent", g.gpm->sm_active_percent},
                  {"sm_occupancy_percent", g.gpm->sm_occupancy_percent},
                  {"tensor_active_percent", g.gpm->tensor_active_percent},
                  {"dram_bw_percent", g.gpm->dram_bw_percent}}) {
              if (value) {
                v.emplace_back(p + name, *value);
              }
            }
          }
        }
        v.emplace_back(
            "host/cpu_percent", sample->host.cpu_percent.value_or(0));
      }
    }
  }
  writer_->scalars(s.step, v);
  if (t != nullptr && telemetry_->last_step().window) {
    writer_->flush(); // a window's end: readable while the run goes on
  }
}

void TensorBoardCallback::on_loss(const RunState&, const StepLoss& l) {
  if (writer_) {
    writer_->scalars(l.step, {{"train/loss", l.loss}});
  }
}

void TensorBoardCallback::on_evaluation(
    const RunState& s,
    const EvalResult& r) {
  if (!writer_) {
    return;
  }
  std::vector<std::pair<std::string, double>> v = {
      {"val/loss", r.loss}, {"val/accuracy", r.accuracy}};
  if (r.perplexity) {
    v.emplace_back("val/perplexity", *r.perplexity);
  }
  if (r.bits_per_byte) {
    v.emplace_back("val/bits_per_byte", *r.bits_per_byte);
  }
  writer_->scalars(s.step, v);
}

nlohmann::json TensorBoardCallback::on_fit_end(
    const RunState&,
    const TrainSummary&) {
  if (writer_) {
    writer_->flush();
  }
  return nullptr;
}

} // namespace hotloop::train
