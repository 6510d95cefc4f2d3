#include "hotloop/train/loop_run.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/train/callbacks/telemetry_callback.h"
#include "hotloop/train/events.h"
#include "hotloop/train/mfu.h"
#include "hotloop/train/run_figures.h"
#include "hotloop/train/run_folder.h"
#include "hotloop/train/run_report.h"
#include "hotloop/train/run_state.h"
#include "hotloop/train/step_times.h"

namespace hotloop::train {

namespace {

using Clock = std::chrono::steady_clock;

// The caller's model, as far as the callbacks ask about it: its tokens per
// sample and FLOPs. hotloop never runs it.
class OutsideModel final : public model::Model {
 public:
  OutsideModel(std::int64_t tokens, double flops)
      : tokens_(tokens), flops_(flops) {}
  at::Tensor forward(const at::Tensor&) override {
    throw Error("hotloop.Run's model is the caller's: hotloop never runs it");
  }
  double training_flops_per_sample() const override {
    return flops_;
  }
  std::int64_t tokens_per_sample() const override {
    return tokens_;
  }

 private:
  std::int64_t tokens_;
  double flops_;
};

constexpr std::size_t kRecentLosses = 50; // train_loss: their mean

} // namespace

struct LoopRun::Impl {
  LoopRunOptions options;
  TrainerOptions trainer; // what the callbacks read of a run's options
  std::shared_ptr<OutsideModel> model;
  RunState state;
  std::unique_ptr<Events> events;
  std::shared_ptr<TelemetryCallback> telemetry; // null: telemetry off
  StepTimes times;
  Clock::time_point started = Clock::now();
  Clock::time_point step_start{};
  Clock::time_point last_end{};
  bool has_last_end = false;
  double step_wait = 0;
  std::int64_t samples_per_step = 0;
  std::deque<double> recent_losses;
  std::optional<TrainSummary> summary;
};

LoopRun::LoopRun(LoopRunOptions o) : impl_(std::make_unique<Impl>()) {
  o.callbacks.validate();
  if (o.num_classes < 0 || o.tokens_per_sample < 0 || o.flops_per_sample < 0 ||
      o.warmup_steps < 0 || o.total_steps < 0) {
    throw UsageError(
        "hotloop.Run: num_classes, tokens_per_sample, flops_per_sample, warmup_steps and total_steps must not be negative");
  }
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    throw UsageError(fmt::format(
        "hotloop.Run: rank {} is not in 0..{} (world_size {})",
        o.rank,
        o.world_size - 1,
        o.world_size));
  }
  if (o.device.is_cuda() && o.device.index() < 0) {
    o.device = c10::Device(c10::kCUDA, 0); // as the trainer reads "cuda"
  }
  Impl& m = *impl_;
  m.options = std::move(o);
  const LoopRunOptions& opt = m.options;
  if (!opt.out_dir.empty() && opt.rank == 0) {
    RunFolder(opt.out_dir).create();
  }
  m.trainer.precision = opt.precision;
  m.trainer.model.name = "outside";
  m.trainer.model.image.num_classes = opt.num_classes;
  m.trainer.model.lm.vocab = opt.num_classes;
  m.trainer.schedule.warmup_steps = opt.warmup_steps;
  m.model = std::make_shared<OutsideModel>(
      opt.tokens_per_sample, opt.flops_per_sample);

  RunState& s = m.state;
  s.options = &m.trainer;
  s.device = opt.device;
  s.rank = opt.rank;
  s.world_size = opt.world_size;
  s.run_dir = opt.out_dir;
  s.model = m.model;
  s.flops_per_sample = opt.flops_per_sample;
  const DevicePeak peak = device_peak(opt.device, opt.precision);
  s.peak_flops_per_s = peak.flops_per_s * static_cast<double>(opt.world_size);
  s.peak_source = peak.source;
  s.total_steps = opt.total_steps;
  s.steps_per_epoch = std::max<std::int64_t>(opt.total_steps, 1);

  Callbacks callbacks = standard_callbacks(opt.callbacks);
  for (const auto& c : callbacks) {
    if (auto t = std::dynamic_pointer_cast<TelemetryCallback>(c)) {
      m.telemetry = t;
    }
  }
  m.events = std::make_unique<Events>(std::move(callbacks));
  s.log = [events = m.events.get(), &s](const std::string& line) {
    events->message(s, line);
  };
  if (s.rank == 0 && !s.run_dir.empty()) {
    nlohmann::json config = {
        {"source", "hotloop.Run"},
        {"device", opt.device.str()},
        {"precision", to_string(opt.precision)},
        {"num_classes", opt.num_classes},
        {"tokens_per_sample", opt.tokens_per_sample},
        {"flops_per_sample", opt.flops_per_sample},
        {"world_size", opt.world_size},
        {"options", opt.config}};
    nlohmann::json callbacks_json = nlohmann::json::array();
    for (const auto& c : m.events->callbacks()) {
      callbacks_json.push_back({{"name", c->name()}, {"config", c->config()}});
    }
    config["callbacks"] = callbacks_json;
    const RunFolder folder(s.run_dir);
    RunFolder::write_json(folder.config(), config);
    if (!opt.tokenizer_files.empty()) {
      folder.keep_tokenizer(opt.tokenizer_files);
    }
  }
  if (s.device.is_cuda()) {
    cuda::reset_peak_memory(s.device.index());
    // The host only queues a GPU step: its speed is timed on the stream, as
    // the trainer times its own.
    m.times.use_device_clock(std::make_unique<cuda::GpuTimer>(
        cuda::cuda_events(std::max<int>(0, s.device.index())), 1));
  }
  m.events->fit_start(s);
}

LoopRun::~LoopRun() {
  try {
    finish();
  } catch (...) {
    // A destructor cannot report it; finish() called by hand does.
  }
}

void LoopRun::begin_step(std::optional<double> data_wait_s) {
  Impl& m = *impl_;
  if (m.summary) {
    throw UsageError("hotloop.Run: the run has finished; start a new Run");
  }
  if (in_step_) {
    throw UsageError(fmt::format(
        "hotloop.Run: step {} began and has not ended: call end_step() before the next begin_step()",
        m.state.step + 1));
  }
  if (data_wait_s && (*data_wait_s < 0 || !std::isfinite(*data_wait_s))) {
    throw UsageError(fmt::format(
        "hotloop.Run: data_wait_s {} is not a duration", *data_wait_s));
  }
  const Clock::time_point now = Clock::now();
  const double wait = data_wait_s ? *data_wait_s
      : m.has_last_end ? std::chrono::duration<double>(now - m.last_end).count()
                       : 0.0;
  m.step_wait = wait;
  m.step_start = now -
      std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(wait));
  in_step_ = true;
  m.times.begin_step();
  m.events->step_begin(m.state);
  m.events->phase(m.state, Phase::Data);
  if (m.telemetry && m.telemetry->run()) {
    m.telemetry->run()->add_phase_seconds(Phase::Data, wait);
  }
  m.events->phase(m.state, Phase::Forward);
}

void LoopRun::phase(Phase p) {
  if (!in_step_) {
    throw UsageError(fmt::format(
        "hotloop.Run: phase '{}' outside a step: call begin_step() first",
        to_string(p)));
  }
  impl_->events->phase(impl_->state, p);
}

std::int64_t LoopRun::end_step(
    std::int64_t samples,
    double lr,
    bool loss_follows) {
  Impl& m = *impl_;
  if (!in_step_) {
    throw UsageError(
        "hotloop.Run: end_step() without a step: call begin_step() first");
  }
  if (samples < 1) {
    throw UsageError(fmt::format(
        "hotloop.Run: end_step(samples={}): a step takes at least one sample",
        samples));
  }
  const Clock::time_point now = Clock::now();
  const double seconds =
      std::max(1e-9, std::chrono::duration<double>(now - m.step_start).count());
  in_step_ = false;
  ++m.state.step;
  if (m.samples_per_step == 0) {
    m.samples_per_step = samples;
  }
  StepEnd e;
  e.lr = lr;
  e.seconds = seconds;
  e.data_wait_seconds = m.step_wait;
  e.samples = samples * m.state.world_size;
  e.loss_follows = loss_follows;
  m.events->step_end(m.state, e);
  m.times.add(seconds, m.step_wait);
  m.last_end = now;
  m.has_last_end = true;
  return m.state.step;
}

void LoopRun::record_loss(std::int64_t step, double loss) {
  Impl& m = *impl_;
  if (step < 1 || step > m.state.step) {
    throw UsageError(fmt::format(
        "hotloop.Run: a loss for step {}, but steps 1..{} have ended",
        step,
        m.state.step));
  }
  m.recent_losses.push_back(loss);
  if (m.recent_losses.size() > kRecentLosses) {
    m.recent_losses.pop_front();
  }
  m.events->loss(m.state, {step, loss, std::nullopt});
}

std::optional<telemetry::Diagnosis> LoopRun::diagnosis() const {
  if (impl_->telemetry && impl_->telemetry->run()) {
    return impl_->telemetry->run()->last_diagnosis();
  }
  return std::nullopt;
}

std::int64_t LoopRun::steps() const {
  return impl_->state.step;
}

TrainSummary LoopRun::finish(std::size_t bad_samples, bool stopped_early) {
  Impl& m = *impl_;
  if (m.summary) {
    return *m.summary;
  }
  RunState& s = m.state;
  in_step_ = false;
  m.events->phase(s, Phase::Finished);
  TrainSummary sum;
  sum.steps = s.step;
  sum.epochs = 0;
  if (!m.recent_losses.empty()) {
    sum.train_loss =
        std::accumulate(m.recent_losses.begin(), m.recent_losses.end(), 0.0) /
        static_cast<double>(m.recent_losses.size());
  }
  m.times.fill(
      sum, m.samples_per_step * s.world_size, nlohmann::json::object());
  fill_model_flops(sum, s);
  if (s.device.is_cuda()) {
    const cuda::MemoryStats mem = cuda::memory_stats(s.device.index());
    sum.peak_allocated_bytes = mem.peak_allocated;
    sum.peak_reserved_bytes = mem.peak_reserved;
  }
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.bad_samples = bad_samples;
  sum.device = s.device.str();
  sum.precision = to_string(m.options.precision);
  sum.micro_batch = m.samples_per_step;
  sum.accum_steps = 1;
  sum.stopped_early = stopped_early;
  sum.wall_s = std::chrono::duration<double>(Clock::now() - m.started).count();
  sum.callbacks = m.events->fit_end(s, sum);
  m.summary = sum;
  if (s.rank == 0 && !s.run_dir.empty()) {
    RunFolder::write_json(RunFolder(s.run_dir).summary(), sum.to_json());
    try {
      write_run_report(s.run_dir);
    } catch (const std::exception& e) {
      // summary.json is written: a page less is not a failure of the run.
      s.log(fmt::format("report.html not written: {}", e.what()));
    }
  }
  return sum;
}

} // namespace hotloop::train
