#include "hotloop/telemetry/sampler.h"

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "hotloop/env/nvml_library.h"
#include "hotloop/env/own_process.h"

namespace hotloop::telemetry {

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
      1e-9 * static_cast<double>(ts.tv_nsec);
}

double unix_now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

void accumulate(
    Window& w,
    const Sample& s,
    const std::string& gpu_uuid,
    const env::ProcessIdentity& me) {
  ++w.samples;
  w.cpu_percent_mean += s.host.cpu_percent.value_or(0);
  w.rss_max = std::max(w.rss_max, s.host.rss_bytes);
  const GpuSample* g = nullptr;
  for (const auto& candidate : s.gpus) {
    if (gpu_uuid.empty() ? g == nullptr : candidate.uuid == gpu_uuid) {
      g = &candidate;
    }
  }
  if (g == nullptr) {
    return;
  }
  if (!w.gpu) {
    w.gpu = GpuWindow{};
    w.gpu->memory_used_first = g->memory_used_bytes.value_or(0);
  }
  GpuWindow& gw = *w.gpu;
  ++gw.samples;
  gw.util_mean += g->util_percent.value_or(0);
  gw.memory_util_mean += g->memory_util_percent.value_or(0);
  gw.sm_clock_mean += g->sm_clock_mhz.value_or(0);
  gw.sm_clock_max = std::max(gw.sm_clock_max, g->sm_clock_max_mhz.value_or(0));
  const std::uint64_t reasons = g->throttle_reasons.value_or(0);
  gw.throttle_mask |= reasons;
  gw.slowing_mask |= slowing_reasons(reasons);
  gw.slowed_samples += slowing_reasons(reasons) != 0 ? 1 : 0;
  gw.temperature_max =
      std::max(gw.temperature_max, g->temperature_c.value_or(0));
  gw.slowdown_temperature = g->slowdown_temperature_c.value_or(0);
  gw.power_mean += g->power_w.value_or(0);
  gw.power_limit = g->power_limit_w.value_or(0);
  gw.memory_used_last = g->memory_used_bytes.value_or(0);
  gw.memory_total = g->memory_total_bytes.value_or(0);
  gw.pcie_rx_mb_s_mean += g->pcie_rx_mb_s.value_or(0);
  gw.pcie_tx_mb_s_mean += g->pcie_tx_mb_s.value_or(0);
  gw.gpm_skip = g->gpm_skip;
  if (g->gpm && g->gpm->sm_active_percent) {
    ++gw.gpm_samples;
    gw.sm_active_mean += *g->gpm->sm_active_percent;
    gw.sm_occupancy_mean += g->gpm->sm_occupancy_percent.value_or(0);
    gw.tensor_active_mean += g->gpm->tensor_active_percent.value_or(0);
    gw.dram_bw_mean += g->gpm->dram_bw_percent.value_or(0);
  }
  if (g->processes) {
    env::OtherProcesses others = env::other_processes(*g->processes, me);
    gw.other_processes = std::move(others.processes);
    gw.processes_unknown = std::move(others.unknown);
  }
}

Window finish(Window w) {
  if (w.samples > 0) {
    w.cpu_percent_mean /= static_cast<double>(w.samples);
  }
  if (w.gpu && w.gpu->samples > 0) {
    const auto n = static_cast<double>(w.gpu->samples);
    w.gpu->util_mean /= n;
    w.gpu->memory_util_mean /= n;
    w.gpu->sm_clock_mean /= n;
    w.gpu->power_mean /= n;
    w.gpu->pcie_rx_mb_s_mean /= n;
    w.gpu->pcie_tx_mb_s_mean /= n;
  }
  if (w.gpu && w.gpu->gpm_samples > 0) {
    const auto n = static_cast<double>(w.gpu->gpm_samples);
    w.gpu->sm_active_mean /= n;
    w.gpu->sm_occupancy_mean /= n;
    w.gpu->tensor_active_mean /= n;
    w.gpu->dram_bw_mean /= n;
  }
  return w;
}

struct Sampler::Impl {
  SamplerOptions options;
  std::unique_ptr<nvml::Library> nvml;
  std::unique_ptr<GpmSampler> gpm; // after nvml: freed before it closes
  std::string nvml_error;
  HostCpu cpu;
  std::ofstream jsonl;

  mutable std::mutex mutex; // guards what follows
  Window window;
  std::optional<Sample> latest;
  std::size_t taken = 0;
  double busy = 0;
  bool stop = false;
  std::condition_variable wake;
  std::thread thread;

  void sample_once() {
    const double t0 = thread_cpu_seconds();
    Sample s;
    s.unix_time = unix_now();
    if (nvml) {
      s.gpus = sample_gpus(*nvml, gpm.get());
    }
    s.host.cpu_percent = cpu.percent();
    s.host.rss_bytes = process_rss_bytes();
    if (jsonl.is_open()) {
      jsonl << to_json(s).dump() << '\n';
      jsonl.flush();
    }
    // This process is on the followed GPU when it trains there: with its
    // reserved memory, it can be told apart inside a container too.
    const env::ProcessIdentity me = env::this_process(
        !options.gpu_uuid.empty(),
        options.reserved_bytes ? options.reserved_bytes() : 0);
    const double cost = thread_cpu_seconds() - t0;
    std::lock_guard<std::mutex> lock(mutex);
    accumulate(window, s, options.gpu_uuid, me);
    latest = std::move(s);
    ++taken;
    busy += cost;
  }

  void run() {
    const auto interval = std::chrono::duration<double>(options.interval_s);
    auto next = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop) {
      lock.unlock();
      sample_once();
      lock.lock();
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          interval);
      wake.wait_until(lock, next, [this] { return stop; });
    }
  }
};

Sampler::Sampler(SamplerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  try {
    impl_->nvml = nvml::Library::open(
        impl_->options.nvml_library.empty() ? nvml::default_library_path()
                                            : impl_->options.nvml_library);
  } catch (const Error& e) {
    impl_->nvml_error = e.what();
  }
  if (impl_->nvml) {
    impl_->gpm = std::make_unique<GpmSampler>(*impl_->nvml);
  }
  if (!impl_->options.jsonl_path.empty()) {
    impl_->jsonl.open(impl_->options.jsonl_path, std::ios::app);
  }
  impl_->cpu.percent(); // the baseline for the first sample's CPU use
  impl_->thread = std::thread([this] { impl_->run(); });
}

Sampler::~Sampler() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

Window Sampler::take_window() {
  Window w;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    std::swap(w, impl_->window);
  }
  return finish(std::move(w));
}

std::optional<Sample> Sampler::latest() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->latest;
}

std::size_t Sampler::samples_taken() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->taken;
}

double Sampler::busy_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->busy;
}

bool Sampler::nvml_loaded() const {
  return impl_->nvml != nullptr;
}

const std::string& Sampler::nvml_error() const {
  return impl_->nvml_error;
}

} // namespace hotloop::telemetry
