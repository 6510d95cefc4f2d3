#include "hotloop/train/callbacks/metrics_file.h"

#include <filesystem>
#include <vector>

#include "hotloop/train/run_folder.h"

namespace hotloop::train {

namespace fs = std::filesystem;

MetricsFile::MetricsFile(std::shared_ptr<const TelemetryCallback> telemetry)
    : telemetry_(std::move(telemetry)) {}

void MetricsFile::on_fit_start(const RunState& s) {
  if (s.rank != 0 || s.run_dir.empty()) {
    return;
  }
  const fs::path path = RunFolder(s.run_dir).metrics();
  if (s.resumed_at >= 0) {
    // The lines after the checkpoint belong to a timeline being replayed.
    std::vector<std::string> keep;
    {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded() &&
            j.value("step", std::int64_t{0}) <= s.resumed_at) {
          keep.push_back(line);
        }
      }
    }
    std::ofstream rewrite(path, std::ios::trunc);
    for (const auto& line : keep) {
      rewrite << line << '\n';
    }
  }
  out_.open(path, s.resumed_at >= 0 ? std::ios::app : std::ios::trunc);
}

void MetricsFile::on_phase(const RunState&, Phase p) {
  if (p == Phase::Checkpoint && out_.is_open()) {
    out_.flush(); // the file holds every line the checkpoint's step has
  }
}

void MetricsFile::on_step_end(const RunState& s, const StepEnd& e) {
  if (!out_.is_open()) {
    return;
  }
  nlohmann::json line = {
      {"step", s.step},
      {"epoch", s.epoch},
      {"lr", e.lr},
      {"step_time_ms", e.seconds * 1e3},
      {"images_per_s", static_cast<double>(e.samples) / e.seconds},
      {"data_wait_ms", e.data_wait_seconds * 1e3}};
  if (const std::int64_t tokens = s.model->tokens_per_sample(); tokens > 0) {
    line["tokens_per_s"] = static_cast<double>(e.samples * tokens) / e.seconds;
  }
  if (s.flops_per_sample > 0) {
    const double flops_per_s =
        static_cast<double>(e.samples) * s.flops_per_sample / e.seconds;
    line["model_flops_per_s"] = flops_per_s;
    if (s.peak_flops_per_s > 0) {
      line["mfu"] = flops_per_s / s.peak_flops_per_s;
    }
  }
  if (e.loss_scale > 0) {
    line["loss_scale"] = e.loss_scale;
    line["skipped"] = e.skipped;
  }
  const telemetry::StepOutput* t =
      telemetry_ ? &telemetry_->last_step() : nullptr;
  if (t != nullptr && !t->phases_ms.is_null()) {
    line["phases_ms"] = t->phases_ms;
    if (t->phases_step != s.step) {
      // On a GPU: the newest step whose events had completed.
      line["phases_of_step"] = t->phases_step;
    }
  }
  pending_.push_back({std::move(line), s.step, e.loss_follows});
  if (t != nullptr && t->window) {
    pending_.push_back({*t->window, s.step, false});
  }
}

void MetricsFile::on_loss(const RunState&, const StepLoss& l) {
  for (auto& p : pending_) {
    if (p.needs_loss && p.step == l.step) {
      p.line["loss"] = l.loss;
      if (l.grad_norm) {
        p.line["grad_norm"] = *l.grad_norm;
      }
      p.needs_loss = false;
      break;
    }
  }
  write_ready();
}

void MetricsFile::on_evaluation(const RunState& s, const EvalResult& r) {
  if (!out_.is_open()) {
    return;
  }
  write_ready();
  pending_.push_back(
      {{{"step", s.step},
        {"val_loss", r.loss},
        {"val_accuracy", r.accuracy},
        {"val_samples", r.samples}},
       s.step,
       false});
  if (r.perplexity) {
    pending_.back().line["val_perplexity"] = *r.perplexity;
  }
  if (r.bits_per_byte) {
    pending_.back().line["val_bits_per_byte"] = *r.bits_per_byte;
  }
  write_ready();
}

void MetricsFile::on_oom_recovery(
    const RunState& s,
    const OomRecoveryEvent& e) {
  if (!out_.is_open()) {
    return;
  }
  pending_.push_back(
      {{{"step", s.step},
        {"event", "oom_recovery"},
        {"micro_batch", e.micro_batch},
        {"accum_steps", e.accum_steps}},
       s.step,
       false});
  write_ready();
}

nlohmann::json MetricsFile::on_fit_end(const RunState&, const TrainSummary&) {
  for (auto& p : pending_) {
    p.needs_loss = false; // a loss that never came: the line without it
  }
  write_ready();
  if (out_.is_open()) {
    out_.flush();
  }
  return nullptr;
}

void MetricsFile::write_ready() {
  while (!pending_.empty() && !pending_.front().needs_loss) {
    out_ << pending_.front().line.dump() << '\n';
    pending_.pop_front();
  }
}

} // namespace hotloop::train
