// The summary in one place: summary.json's shape, the steady-state rule and
// percentiles, and the speed figures from step times (step_times.h).
#include "hotloop/train/summary.h"

#include <algorithm>

#include "hotloop/train/step_times.h"

namespace hotloop::train {

std::size_t steady_state_start(std::size_t steps) {
  return std::min(steps / 10 + 2, steps > 3 ? steps - 3 : 0);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json EvalResult::to_json() const {
  return {
      {"loss", loss},
      {"accuracy", accuracy},
      {"samples", samples},
      {"per_class_accuracy", per_class_accuracy},
      {"confusion", confusion},
      {"perplexity",
       perplexity ? nlohmann::json(*perplexity) : nlohmann::json()},
      {"bits_per_byte",
       bits_per_byte ? nlohmann::json(*bits_per_byte) : nlohmann::json()}};
}

EvalResult EvalResult::from_json(const nlohmann::json& j) {
  EvalResult r;
  r.loss = j.at("loss").get<double>();
  r.accuracy = j.at("accuracy").get<double>();
  r.samples = j.at("samples").get<std::int64_t>();
  r.per_class_accuracy = j.at("per_class_accuracy").get<std::vector<double>>();
  r.confusion = j.at("confusion").get<std::vector<std::vector<std::int64_t>>>();
  if (j.contains("perplexity") && j["perplexity"].is_number()) {
    r.perplexity = j["perplexity"].get<double>();
  }
  if (j.contains("bits_per_byte") && j["bits_per_byte"].is_number()) {
    r.bits_per_byte = j["bits_per_byte"].get<double>();
  }
  return r;
}

nlohmann::json TrainSummary::to_json() const {
  nlohmann::json j = {
      {"steps", steps},
      {"epochs", epochs},
      {"train_loss", train_loss},
      {"val_loss", eval ? nlohmann::json(eval->loss) : nlohmann::json()},
      {"val_accuracy",
       eval ? nlohmann::json(eval->accuracy) : nlohmann::json()},
      {"images_per_s", images_per_s},
      {"tokens_per_s", tokens_per_s},
      {"model_flops_per_s", model_flops_per_s},
      {"mfu", mfu ? nlohmann::json(*mfu) : nlohmann::json()},
      {"mfu_peak", mfu_peak_source},
      {"step_time_ms",
       {{"median", step_time_ms_median},
        {"p90", step_time_ms_p90},
        {"clock", step_clock}}},
      {"data_wait_fraction", data_wait_fraction},
      {"peak_memory_bytes",
       {{"allocated", peak_allocated_bytes},
        {"reserved", peak_reserved_bytes},
        {"rss", peak_rss_bytes}}},
      {"model_state_bytes", model_state_bytes},
      {"shard", shard},
      {"skipped_steps", skipped_steps},
      {"bad_samples", bad_samples},
      {"micro_batch", micro_batch},
      {"accum_steps", accum_steps},
      {"oom_recoveries", oom_recoveries},
      {"device", device},
      {"precision", precision},
      {"wall_s", wall_s},
      {"cuda_graphs",
       {{"replays", graph_replays},
        {"off_reason", graph_off_reason},
        {"capture_out_of_memory", graph_capture_out_of_memory}}},
      {"stopped_early", stopped_early},
      {"last_checkpoint", last_checkpoint},
      {"weights", weights},
      {"resumed_at",
       resumed_at >= 0 ? nlohmann::json(resumed_at) : nlohmann::json()},
      {"from_before_resume", from_before_resume}};
  const nlohmann::json telemetry =
      callbacks.value("telemetry", nlohmann::json{{"enabled", false}});
  j["telemetry"] = telemetry;
  j["telemetry_overhead"] = telemetry.value("overhead", 0.0);
  j["diagnosis"] = telemetry.contains("diagnosis")
      ? telemetry["diagnosis"]["verdict"]
      : nlohmann::json();
  for (const auto& [name, figures] : callbacks.items()) {
    if (name != "telemetry") {
      j[name] = figures;
    }
  }
  if (eval) {
    j["val_per_class_accuracy"] = eval->per_class_accuracy;
    j["val_confusion"] = eval->confusion;
    j["val_samples"] = eval->samples;
    if (eval->perplexity) {
      j["val_perplexity"] = *eval->perplexity;
    }
    if (eval->bits_per_byte) {
      j["val_bits_per_byte"] = *eval->bits_per_byte;
    }
  }
  return j;
}

StepTimes::StepTimes() = default;
StepTimes::~StepTimes() = default;
StepTimes::StepTimes(StepTimes&&) noexcept = default;
StepTimes& StepTimes::operator=(StepTimes&&) noexcept = default;

void StepTimes::use_device_clock(std::unique_ptr<cuda::GpuTimer> clock) {
  device_clock_ = std::move(clock);
}

void StepTimes::begin_step() {
  if (device_clock_) {
    device_clock_->begin(); // a step redone after an OOM starts again
  }
}

void StepTimes::collect(const std::vector<cuda::TimedStep>& done) {
  for (const cuda::TimedStep& t : done) {
    device_seconds_.push_back(t.ms[0] / 1e3);
  }
}

void StepTimes::add(double seconds, double data_wait_seconds) {
  seconds_.push_back(seconds);
  wait_total_ += data_wait_seconds;
  time_total_ += seconds;
  if (device_clock_) {
    device_clock_->mark(0);
    collect(device_clock_->end(static_cast<std::int64_t>(seconds_.size())));
  }
}

void StepTimes::fill(
    TrainSummary& s,
    std::int64_t samples_per_step,
    const nlohmann::json& before) {
  if (seconds_.empty() && before.contains("images_per_s")) {
    s.images_per_s = before.value("images_per_s", 0.0);
    s.step_time_ms_median = before.value("step_time_ms_median", 0.0);
    s.step_time_ms_p90 = before.value("step_time_ms_p90", 0.0);
    s.data_wait_fraction = before.value("data_wait_fraction", 0.0);
    s.step_clock = before.value("step_clock", std::string("host"));
    for (const char* k :
         {"images_per_s", "step_time_ms", "data_wait_fraction"}) {
      s.from_before_resume.emplace_back(k);
    }
    return;
  }
  if (device_clock_) {
    collect(device_clock_->drain());
  }
  s.data_wait_fraction = time_total_ > 0 ? wait_total_ / time_total_ : 0;
  auto steady = [](const std::vector<double>& all) {
    const std::size_t warm = steady_state_start(all.size());
    return std::vector<double>(
        all.begin() + static_cast<std::ptrdiff_t>(warm), all.end());
  };
  if (!device_seconds_.empty()) {
    // The GPU's time for the steady-state steps, back to back: samples over
    // the time the device spent on them (gaps for evaluation and
    // checkpoints fall between steps, outside it).
    const std::vector<double> gpu = steady(device_seconds_);
    double elapsed = 0;
    for (const double t : gpu) {
      elapsed += t;
    }
    s.images_per_s = elapsed > 0 ? static_cast<double>(samples_per_step) *
            static_cast<double>(gpu.size()) / elapsed
                                 : 0;
    s.step_time_ms_median = percentile(gpu, 0.5) * 1e3;
    s.step_time_ms_p90 = percentile(gpu, 0.9) * 1e3;
    s.step_clock = "cuda-events";
    return;
  }
  const std::vector<double> host = steady(seconds_);
  std::vector<double> rates;
  for (const double t : host) {
    rates.push_back(static_cast<double>(samples_per_step) / t);
  }
  s.images_per_s = percentile(rates, 0.5);
  s.step_time_ms_median = percentile(host, 0.5) * 1e3;
  s.step_time_ms_p90 = percentile(host, 0.9) * 1e3;
  s.step_clock = "host";
}

nlohmann::json StepTimes::progress(std::int64_t samples_per_step) {
  TrainSummary s;
  fill(s, samples_per_step, nlohmann::json::object());
  return {
      {"images_per_s", s.images_per_s},
      {"step_time_ms_median", s.step_time_ms_median},
      {"step_time_ms_p90", s.step_time_ms_p90},
      {"data_wait_fraction", s.data_wait_fraction},
      {"step_clock", s.step_clock}};
}

} // namespace hotloop::train
