#include "hotloop/telemetry/run_telemetry.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/cuda/gpu_timer.h"
#include "hotloop/telemetry/metrics_server.h"
#include "hotloop/telemetry/sampler.h"
#include "hotloop/telemetry/tensorboard.h"

namespace hotloop::telemetry {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kPhases = static_cast<std::size_t>(Phase::Count);
constexpr const char* kPhaseNames[kPhases] = {
    "data_wait",
    "copy",
    "forward",
    "backward",
    "optimizer",
    "allreduce",
    "graph"};

double& at(PhaseTotals& t, std::size_t phase) {
  switch (static_cast<Phase>(phase)) {
    case Phase::DataWait:
      return t.data_wait;
    case Phase::Copy:
      return t.copy;
    case Phase::Forward:
      return t.forward;
    case Phase::Backward:
      return t.backward;
    case Phase::AllReduce:
      return t.allreduce;
    case Phase::Graph:
      return t.graph;
    default:
      return t.optimizer;
  }
}

std::string prometheus_text(
    const StepRecord& r,
    const std::optional<Sample>& sample,
    const std::optional<Diagnosis>& d,
    const cuda::MemoryStats& m,
    bool on_cuda) {
  std::string out;
  auto metric =
      [&](const char* name, const char* type, const char* help, double v) {
        out += fmt::format(
            "# HELP hotloop_{0} {1}\n# TYPE hotloop_{0} {2}\nhotloop_{0} {3}\n",
            name,
            help,
            type,
            v);
      };
  metric(
      "step", "counter", "Optimizer steps done.", static_cast<double>(r.step));
  metric("loss", "gauge", "Training loss of the latest step.", r.loss);
  metric("learning_rate", "gauge", "Learning rate of the latest step.", r.lr);
  metric(
      "images_per_second",
      "gauge",
      "Images per second of the latest step.",
      r.images_per_s);
  if (on_cuda) {
    metric(
        "cuda_allocated_bytes",
        "gauge",
        "CUDA caching allocator: bytes held by tensors.",
        static_cast<double>(m.allocated));
    metric(
        "cuda_reserved_bytes",
        "gauge",
        "CUDA caching allocator: bytes taken from the driver.",
        static_cast<double>(m.reserved));
    metric(
        "cuda_alloc_retries",
        "counter",
        "cudaMalloc failures retried after freeing the cache.",
        static_cast<double>(m.alloc_retries));
  }
  if (sample) {
    out +=
        "# HELP hotloop_gpu_utilization_percent GPU busy over NVML's sample period.\n# TYPE hotloop_gpu_utilization_percent gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_utilization_percent{{gpu=\"{}\"}} {}\n",
          g.index,
          g.util_percent.value_or(0));
    }
    out +=
        "# HELP hotloop_gpu_memory_used_bytes GPU memory in use (all processes).\n# TYPE hotloop_gpu_memory_used_bytes gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_memory_used_bytes{{gpu=\"{}\"}} {}\n",
          g.index,
          g.memory_used_bytes.value_or(0));
    }
    out +=
        "# HELP hotloop_gpu_temperature_celsius GPU temperature.\n# TYPE hotloop_gpu_temperature_celsius gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_temperature_celsius{{gpu=\"{}\"}} {}\n",
          g.index,
          g.temperature_c.value_or(0));
    }
    out +=
        "# HELP hotloop_gpu_power_watts GPU power draw.\n# TYPE hotloop_gpu_power_watts gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_power_watts{{gpu=\"{}\"}} {}\n",
          g.index,
          g.power_w.value_or(0));
    }
    metric(
        "host_cpu_percent",
        "gauge",
        "Host CPU utilization.",
        sample->host.cpu_percent.value_or(0));
    metric(
        "process_rss_bytes",
        "gauge",
        "This process's resident memory.",
        static_cast<double>(sample->host.rss_bytes));
  }
  if (d) {
    out += fmt::format(
        "# HELP hotloop_verdict The latest window's diagnosis (1 for the verdict).\n# TYPE hotloop_verdict gauge\nhotloop_verdict{{verdict=\"{}\"}} 1\n",
        d->primary().verdict);
  }
  return out;
}

} // namespace

RunTelemetry::RunTelemetry(
    RunTelemetryOptions options,
    c10::Device device,
    const std::string& run_dir)
    : options_(std::move(options)), device_(device) {
  if (!options_.enabled) {
    return;
  }
  if (!device_.is_cuda()) {
    usable_gpu_ = cuda::state().available;
  }
  std::string gpu_uuid;
  if (device_.is_cuda()) {
    for (const auto& d : cuda::state().devices) {
      if (d.index == std::max<int>(0, device_.index())) {
        gpu_uuid = d.uuid;
      }
    }
    gpu_timer_ = std::make_unique<cuda::GpuTimer>(
        std::max<int>(0, device_.index()), kPhases);
  }
  SamplerOptions so;
  so.interval_s = options_.interval_s;
  so.nvml_library = options_.nvml_library;
  so.gpu_uuid = gpu_uuid;
  if (!run_dir.empty()) {
    so.jsonl_path =
        (std::filesystem::path(run_dir) / "telemetry.jsonl").string();
    if (options_.tensorboard) {
      tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir);
    }
  }
  sampler_ = std::make_unique<Sampler>(so);
  if (options_.metrics_port > 0) {
    metrics_ = std::make_unique<MetricsServer>(options_.metrics_port);
  }
}

RunTelemetry::~RunTelemetry() = default;

void RunTelemetry::record_loss(std::int64_t step, double loss) {
  if (!options_.enabled) {
    return;
  }
  last_loss_ = loss;
  last_record_.loss = loss;
  if (tensorboard_) {
    tensorboard_->scalars(step, {{"train/loss", loss}});
  }
}

void RunTelemetry::begin_step() {
  if (!options_.enabled) {
    return;
  }
  mark_ = Clock::now();
  for (auto& p : cpu_phase_) {
    p = 0;
  }
  if (gpu_timer_) {
    gpu_timer_->begin();
  }
}

void RunTelemetry::end_phase(Phase p) {
  if (!options_.enabled) {
    return;
  }
  const Clock::time_point now = Clock::now();
  cpu_phase_[static_cast<std::size_t>(p)] +=
      std::chrono::duration<double>(now - mark_).count();
  mark_ = now;
  if (gpu_timer_) {
    // On the GPU, the stream's time across the loader's next() is the copy
    // it waits for (and the normalization); the host's time is the data wait.
    gpu_timer_->mark(
        static_cast<std::size_t>(p == Phase::DataWait ? Phase::Copy : p));
  }
}

StepOutput RunTelemetry::end_step(const StepRecord& r) {
  StepOutput out;
  if (!options_.enabled) {
    return out;
  }
  last_record_ = r;
  if (std::isnan(r.loss)) {
    last_record_.loss = last_loss_;
  } else {
    last_loss_ = r.loss;
  }
  // The phases: CPU clocks on the CPU. On a GPU the data wait is the host's
  // and the rest comes from the events of the previous step.
  double seconds[kPhases] = {};
  bool have = true;
  if (gpu_timer_) {
    const auto ms = gpu_timer_->end();
    have = ms.has_value();
    if (have) {
      for (std::size_t i = 0; i < kPhases; ++i) {
        seconds[i] = (*ms)[i] / 1e3;
      }
    }
    seconds[0] = cpu_phase_[0];
  } else {
    for (std::size_t i = 0; i < kPhases; ++i) {
      seconds[i] = cpu_phase_[i];
    }
  }
  if (window_steps_ == 0) {
    window_first_ = r.step;
  }
  ++window_steps_;
  window_wall_ += r.step_time_s;
  if (have) {
    out.phases_ms = nlohmann::json::object();
    for (std::size_t i = 0; i < kPhases; ++i) {
      at(window_phases_, i) += seconds[i];
      out.phases_ms[kPhaseNames[i]] = seconds[i] * 1e3;
    }
  } else {
    window_phases_.data_wait += seconds[0];
  }

  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> v = {
        {"train/lr", r.lr},
        {"train/images_per_s", r.images_per_s},
        {"train/step_time_ms", r.step_time_s * 1e3}};
    if (!std::isnan(r.loss)) {
      v.emplace_back("train/loss", r.loss);
    }
    if (have) {
      for (std::size_t i = 0; i < kPhases; ++i) {
        v.emplace_back(
            fmt::format("phases/{}_ms", kPhaseNames[i]), seconds[i] * 1e3);
      }
    }
    const std::size_t taken = sampler_->samples_taken();
    if (taken != samples_seen_) {
      samples_seen_ = taken;
      if (const auto s = sampler_->latest()) {
        for (const auto& g : s->gpus) {
          const std::string p = fmt::format("gpu{}/", g.index);
          v.emplace_back(p + "util_percent", g.util_percent.value_or(0));
          v.emplace_back(
              p + "memory_used_gib",
              static_cast<double>(g.memory_used_bytes.value_or(0)) /
                  (1ull << 30));
          v.emplace_back(p + "temperature_c", g.temperature_c.value_or(0));
          v.emplace_back(p + "power_w", g.power_w.value_or(0));
        }
        v.emplace_back("host/cpu_percent", s->host.cpu_percent.value_or(0));
      }
    }
    tensorboard_->scalars(r.step, v);
  }

  if (window_steps_ >= options_.window_steps) {
    const std::optional<Diagnosis> before = last_;
    const std::optional<Diagnosis> d = close_window(r.step);
    if (d) {
      out.window = nlohmann::json{{"step", r.step}};
      (*out.window)["diagnosis"] = to_json(*d);
      if (!last_ranks_.empty()) {
        nlohmann::json ranks = nlohmann::json::array();
        for (const auto& rw : last_ranks_) {
          ranks.push_back(
              {{"rank", rw.rank},
               {"data_wait_s", rw.data_wait},
               {"compute_s", rw.compute}});
        }
        (*out.window)["ranks"] = ranks;
      }
      if (device_.is_cuda()) {
        const cuda::MemoryStats m =
            cuda::memory_stats(std::max<int>(0, device_.index()));
        (*out.window)["memory"] = {
            {"allocated", m.allocated},
            {"reserved", m.reserved},
            {"peak_allocated", m.peak_allocated},
            {"peak_reserved", m.peak_reserved},
            {"cache_gap", m.reserved - m.allocated},
            {"alloc_retries", m.alloc_retries}};
      }
      if (!before || before->primary().verdict != d->primary().verdict) {
        out.log = fmt::format(
            "diagnosis: {}: {}{}",
            d->primary().verdict,
            d->primary().evidence,
            d->primary().fix.empty() ? std::string()
                                     : " -> " + d->primary().fix);
      }
    }
  }
  // The endpoint's text follows the sampler (about 1 Hz, far above any
  // scrape rate), not every step.
  const std::size_t taken = sampler_->samples_taken();
  if (metrics_ && (taken != samples_published_ || out.window)) {
    samples_published_ = taken;
    metrics_->publish(prometheus_text(
        r,
        sampler_->latest(),
        last_,
        device_.is_cuda()
            ? cuda::memory_stats(std::max<int>(0, device_.index()))
            : cuda::MemoryStats{},
        device_.is_cuda()));
  }
  return out;
}

std::optional<Diagnosis> RunTelemetry::close_window(std::int64_t last_step) {
  if (window_steps_ == 0) {
    return std::nullopt;
  }
  WindowInput in;
  in.first_step = window_first_;
  in.last_step = last_step;
  in.wall_s = window_wall_;
  in.phases = window_phases_;
  in.on_cuda = device_.is_cuda();
  in.usable_gpu_present = usable_gpu_;
  const Window w = sampler_->take_window();
  if (device_.is_cuda()) {
    in.gpu = w.gpu;
    const cuda::MemoryStats m =
        cuda::memory_stats(std::max<int>(0, device_.index()));
    allocated_history_.push_back(m.allocated);
    in.memory_history = allocated_history_;
    in.reserved = m.reserved;
  }
  if (options_.world_size > 1 && options_.sum_over_ranks) {
    // Every rank closes its window at the same step: share the busy times.
    const auto n = static_cast<std::size_t>(options_.world_size);
    std::vector<double> v(2 * n, 0.0);
    const auto me = static_cast<std::size_t>(options_.rank);
    v[2 * me] = window_phases_.data_wait;
    v[2 * me + 1] = window_phases_.copy + window_phases_.forward +
        window_phases_.backward + window_phases_.optimizer +
        window_phases_.graph;
    v = options_.sum_over_ranks(v);
    for (std::size_t r = 0; r < n; ++r) {
      in.ranks.push_back({static_cast<int>(r), v[2 * r], v[2 * r + 1]});
    }
  }
  Diagnosis d = diagnose(in, options_.diagnosis);
  last_ranks_ = in.ranks;
  ++verdict_windows_[d.primary().verdict];
  last_ = d;
  window_steps_ = 0;
  window_wall_ = 0;
  window_phases_ = {};
  if (tensorboard_) {
    tensorboard_->flush();
  }
  return d;
}

nlohmann::json RunTelemetry::finish(double run_wall_s) {
  if (!options_.enabled) {
    return {{"enabled", false}};
  }
  // A last partial window of at least a few steps gets its diagnosis too, so
  // that short runs have one.
  if (window_steps_ >= std::min<std::int64_t>(5, options_.window_steps)) {
    close_window(last_record_.step);
  }
  if (tensorboard_) {
    tensorboard_->flush();
  }
  nlohmann::json j = {
      {"enabled", true},
      {"samples", sampler_->samples_taken()},
      {"sampler_cpu_s", sampler_->busy_seconds()},
      {"overhead", run_wall_s > 0 ? sampler_->busy_seconds() / run_wall_s : 0},
      {"nvml",
       sampler_->nvml_loaded() ? std::string("loaded")
                               : sampler_->nvml_error()},
      {"verdict_windows", verdict_windows_}};
  if (last_) {
    j["diagnosis"] = to_json(*last_);
  }
  return j;
}

} // namespace hotloop::telemetry
