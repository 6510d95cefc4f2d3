#include "hotloop/telemetry/run_telemetry.h"

#include <cmath>

#include <fmt/format.h>

#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/cuda/gpu_timer.h"
#include "hotloop/telemetry/sampler.h"

namespace hotloop::telemetry {

namespace {

using Clock = std::chrono::steady_clock;

// The timed slots: a step's phases, with the data phase split on a GPU into
// the host's wait (data_wait) and the stream's time across it (copy).
enum Slot : std::size_t {
  kDataWait,
  kCopy,
  kForward,
  kBackward,
  kOptimizer,
  kAllReduce,
  kGraph
};
constexpr std::size_t kPhases = RunTelemetry::kSlots;
constexpr const char* kPhaseNames[kPhases] = {
    "data_wait",
    "copy",
    "forward",
    "backward",
    "optimizer",
    "allreduce",
    "graph"};

// The slot a step phase is timed in; nullopt for the phases outside a step.
std::optional<std::size_t> slot_of(Phase p) {
  switch (p) {
    case Phase::Data:
      return kDataWait;
    case Phase::Forward:
      return kForward;
    case Phase::Backward:
      return kBackward;
    case Phase::Optimizer:
      return kOptimizer;
    case Phase::AllReduce:
      return kAllReduce;
    case Phase::Graph:
      return kGraph;
    default:
      return std::nullopt;
  }
}

const Finding* find(const Diagnosis& d, const std::string& verdict) {
  for (const auto& f : d.findings) {
    if (f.verdict == verdict) {
      return &f;
    }
  }
  return nullptr;
}

double& at(PhaseTotals& t, std::size_t slot) {
  switch (slot) {
    case kDataWait:
      return t.data_wait;
    case kCopy:
      return t.copy;
    case kForward:
      return t.forward;
    case kBackward:
      return t.backward;
    case kAllReduce:
      return t.allreduce;
    case kGraph:
      return t.graph;
    default:
      return t.optimizer;
  }
}

} // namespace

RunTelemetry::RunTelemetry(
    RunTelemetryOptions options,
    c10::Device device,
    const std::string& jsonl_path)
    : options_(std::move(options)), device_(device) {
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
        cuda::cuda_events(std::max<int>(0, device_.index())), kPhases);
  }
  SamplerOptions so;
  so.interval_s = options_.interval_s;
  so.nvml_library = options_.nvml_library;
  so.gpu_uuid = gpu_uuid;
  if (device_.is_cuda()) {
    so.reserved_bytes = [index = std::max<int>(0, device_.index())] {
      return cuda::memory_stats(index).reserved;
    };
  }
  so.jsonl_path = jsonl_path;
  sampler_ = std::make_unique<Sampler>(so);
}

RunTelemetry::~RunTelemetry() = default;

void RunTelemetry::record_loss(std::int64_t, double loss) {
  window_loss_sum_ += loss;
  ++window_losses_;
}

std::optional<Sample> RunTelemetry::latest_sample() const {
  return sampler_->latest();
}

std::size_t RunTelemetry::samples_taken() const {
  return sampler_->samples_taken();
}

void RunTelemetry::begin_step() {
  in_step_ = true;
  current_.reset();
  mark_ = now();
  for (auto& p : cpu_phase_) {
    p = 0;
  }
  if (gpu_timer_) {
    gpu_timer_->begin();
  }
}

void RunTelemetry::close_phase() {
  const Clock::time_point t = now();
  if (current_) {
    if (const auto slot = slot_of(*current_)) {
      cpu_phase_[*slot] += std::chrono::duration<double>(t - mark_).count();
      if (gpu_timer_) {
        // On the GPU, the stream's time across the loader's next() is the
        // copy it waits for (and the normalization); the host's time is the
        // data wait.
        gpu_timer_->mark(*slot == kDataWait ? kCopy : *slot);
      }
    }
  }
  mark_ = t;
}

Clock::time_point RunTelemetry::now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

void RunTelemetry::enter_phase(Phase p) {
  if (!in_step_) {
    return;
  }
  close_phase();
  current_ = p;
}

void RunTelemetry::add_phase_seconds(Phase p, double seconds) {
  if (const auto slot = slot_of(p); slot && in_step_) {
    cpu_phase_[*slot] += seconds;
  }
}

void RunTelemetry::add_gpu_phases(const std::vector<cuda::TimedStep>& done) {
  for (const cuda::TimedStep& t : done) {
    for (std::size_t i = kCopy; i < kPhases; ++i) {
      at(window_phases_, i) += t.ms[i] / 1e3;
    }
    ++gpu_steps_timed_;
  }
}

StepOutput RunTelemetry::end_step(const StepRecord& r) {
  StepOutput out;
  close_phase();
  in_step_ = false;
  current_.reset();
  last_step_ = r.step;
  if (window_steps_ == 0) {
    window_first_ = r.step;
  }
  ++window_steps_;
  window_wall_ += r.step_time_s;
  // The data wait is the host's, this step's. On the CPU the other phases
  // are the host's too; on a GPU they come from the events of every step
  // whose events have completed by now (usually earlier ones: the host runs
  // ahead), each step counted once, in the window that reads it.
  window_phases_.data_wait += cpu_phase_[kDataWait];
  if (gpu_timer_) {
    const std::vector<cuda::TimedStep> done = gpu_timer_->end(r.step);
    add_gpu_phases(done);
    if (!done.empty()) {
      const cuda::TimedStep& newest = done.back();
      out.phases_ms = nlohmann::json::object();
      out.phases_ms[kPhaseNames[kDataWait]] = cpu_phase_[kDataWait] * 1e3;
      for (std::size_t i = kCopy; i < kPhases; ++i) {
        out.phases_ms[kPhaseNames[i]] = newest.ms[i];
      }
      out.phases_step = newest.step;
    }
  } else {
    out.phases_ms = nlohmann::json::object();
    for (std::size_t i = 0; i < kPhases; ++i) {
      if (i != kDataWait) {
        at(window_phases_, i) += cpu_phase_[i];
      }
      out.phases_ms[kPhaseNames[i]] = cpu_phase_[i] * 1e3;
    }
    out.phases_step = r.step;
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
      auto line = [](const Finding& f) {
        return fmt::format(
            "diagnosis: {}: {}{}",
            f.verdict,
            f.evidence,
            f.fix.empty() ? std::string() : " -> " + f.fix);
      };
      if (!before || before->primary().verdict != d->primary().verdict) {
        out.log = line(d->primary());
      }
      // Not learning is said when it starts, even behind a speed verdict.
      const Finding* stuck = find(*d, "not-learning");
      if (stuck != nullptr && &d->primary() != stuck &&
          (!before || find(*before, "not-learning") == nullptr)) {
        if (!out.log.empty()) {
          out.log += '\n';
        }
        out.log += line(*stuck);
      }
    }
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
  // The first window with losses is the reference, never judged itself.
  const bool have_reference = !std::isnan(first_loss_mean_);
  if (window_losses_ > 0) {
    in.loss_mean = window_loss_sum_ / static_cast<double>(window_losses_);
    if (!have_reference) {
      first_loss_mean_ = in.loss_mean;
    }
  }
  in.first_loss_mean = first_loss_mean_;
  in.chance_loss = options_.chance_loss;
  in.precision = options_.precision;
  in.past_warmup = have_reference && window_first_ > options_.warmup_end;
  window_loss_sum_ = 0;
  window_losses_ = 0;
  const Window w = sampler_->take_window();
  if (device_.is_cuda()) {
    in.gpu = w.gpu;
    const cuda::MemoryStats m =
        cuda::memory_stats(std::max<int>(0, device_.index()));
    allocated_history_.push_back(m.allocated);
    in.memory_history = allocated_history_;
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
  return d;
}

nlohmann::json RunTelemetry::finish(double run_wall_s) {
  if (gpu_timer_) {
    add_gpu_phases(gpu_timer_->drain()); // the last steps' phases
  }
  // A last partial window of at least a few steps gets its diagnosis too, so
  // that short runs have one.
  if (window_steps_ >= std::min<std::int64_t>(5, options_.window_steps)) {
    close_window(last_step_);
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
  if (gpu_timer_) {
    j["gpu_phases_steps"] = gpu_steps_timed_; // steps with GPU phase times
  }
  if (last_) {
    j["diagnosis"] = to_json(*last_);
  }
  return j;
}

} // namespace hotloop::telemetry
