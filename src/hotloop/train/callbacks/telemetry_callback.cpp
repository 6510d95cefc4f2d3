#include "hotloop/train/callbacks/telemetry_callback.h"

#include <algorithm>
#include <cmath>

#include "hotloop/parallel/process_group.h"
#include "hotloop/train/options.h"
#include "hotloop/train/run_folder.h"
#include "hotloop/train/schedule.h"

namespace hotloop::train {

TelemetryCallback::TelemetryCallback(TelemetryOptions options)
    : options_(std::move(options)) {}

TelemetryCallback::~TelemetryCallback() = default;

nlohmann::json TelemetryCallback::config() const {
  return {
      {"interval_s", options_.interval_s},
      {"diagnosis_window", options_.diagnosis_window}};
}

void TelemetryCallback::on_fit_start(const RunState& s) {
  telemetry::RunTelemetryOptions o;
  o.interval_s = options_.interval_s;
  o.window_steps = options_.diagnosis_window;
  o.nvml_library = options_.nvml_library;
  o.rank = s.rank;
  o.world_size = s.world_size;
  // A uniform guess's loss: over the classes, or a language model's
  // vocabulary (unknown for a user's own: 0 turns the check off).
  const std::int64_t outputs = s.model->tokens_per_sample() > 0
      ? s.options->model.lm.vocab
      : s.options->model.image.num_classes;
  o.chance_loss = outputs > 1 ? std::log(static_cast<double>(outputs)) : 0.0;
  o.precision = to_string(s.options->precision);
  o.warmup_end = warmup_end(s.options->schedule, s.total_steps);
  if (s.group != nullptr) {
    o.sum_over_ranks = [g = s.group](std::vector<double> v) {
      return g->allreduce_sum(std::move(v), "telemetry");
    };
  }
  run_ = std::make_unique<telemetry::RunTelemetry>(
      o,
      s.device,
      s.rank == 0 && !s.run_dir.empty() ? RunFolder(s.run_dir).telemetry()
                                        : std::string());
}

void TelemetryCallback::on_step_begin(const RunState&) {
  run_->begin_step();
}

void TelemetryCallback::on_phase(const RunState&, Phase p) {
  if (run_) {
    run_->enter_phase(p);
  }
}

void TelemetryCallback::on_step_end(const RunState& s, const StepEnd& e) {
  last_ = run_->end_step(
      {s.step,
       std::nan(""),
       e.lr,
       e.seconds,
       static_cast<double>(e.samples) / e.seconds});
  if (!last_.log.empty() && s.log) {
    s.log(last_.log);
  }
}

void TelemetryCallback::on_loss(const RunState&, const StepLoss& l) {
  run_->record_loss(l.step, l.loss);
}

nlohmann::json TelemetryCallback::on_fit_end(
    const RunState&,
    const TrainSummary& summary) {
  return run_ ? run_->finish(summary.wall_s) : nlohmann::json();
}

} // namespace hotloop::train
