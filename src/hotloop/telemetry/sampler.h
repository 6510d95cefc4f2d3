#pragma once
// The background sampler: a thread that reads NVML and the host every
// `interval_s` (1 Hz by default), appends each sample to telemetry.jsonl, and
// folds the GPU being trained on into a window the trainer takes every N
// steps. The training thread only ever takes a mutex held for a copy; NVML
// calls happen on the sampler's thread. Its own CPU time is counted, so that
// the run can report what telemetry cost.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hotloop/env/own_process.h"
#include "hotloop/telemetry/samples.h"

namespace hotloop::telemetry {

struct SamplerOptions {
  double interval_s = 1.0;
  std::string nvml_library; // "": nvml::default_library_path()
  std::string jsonl_path; // "": no file
  // The GPU the window follows (its NVML UUID; this process trains on it);
  // "": the first GPU.
  std::string gpu_uuid;
  // This process's memory on that GPU as LibTorch reserved it (to tell it
  // from the others inside a container); empty: unknown.
  std::function<std::uint64_t()> reserved_bytes;
};

// The followed GPU over a window of samples.
struct GpuWindow {
  std::size_t samples = 0;
  double util_mean = 0; // percent
  double memory_util_mean = 0;
  double sm_clock_mean = 0; // MHz
  unsigned int sm_clock_max = 0; // the GPU's maximum
  std::uint64_t throttle_mask = 0; // every reason seen (OR)
  std::uint64_t slowing_mask = 0; // the reasons that slow a busy GPU (OR)
  std::size_t slowed_samples = 0; // samples with a slowing reason
  unsigned int temperature_max = 0;
  unsigned int slowdown_temperature = 0; // 0: unknown
  double power_mean = 0;
  double power_limit = 0; // 0: unknown
  std::uint64_t memory_used_first = 0;
  std::uint64_t memory_used_last = 0;
  std::uint64_t memory_total = 0;
  double pcie_rx_mb_s_mean = 0;
  double pcie_tx_mb_s_mean = 0;
  std::vector<env::GpuProcess> other_processes; // not this process, last seen
  // Why other processes could not be told from this one (a container's PID
  // namespace: then other_processes is empty, and nothing is blamed).
  std::string processes_unknown;
  // GPM counters (Hopper and later), over the samples that had them.
  std::size_t gpm_samples = 0;
  double sm_active_mean = 0; // percent
  double sm_occupancy_mean = 0;
  double tensor_active_mean = 0;
  double dram_bw_mean = 0;
  std::string gpm_skip; // why there are none ("" while they work)
};

struct Window {
  std::optional<GpuWindow> gpu; // none: no NVML or no such GPU
  double cpu_percent_mean = 0;
  std::uint64_t rss_max = 0;
  std::size_t samples = 0;
};

class Sampler {
 public:
  // Opens NVML (a machine without it samples the host only) and starts the
  // thread; its first sample is taken at once.
  explicit Sampler(SamplerOptions options);
  ~Sampler(); // stops and joins the thread
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // The window since the previous call (the aggregate is then reset).
  Window take_window();
  // The newest sample, if any yet.
  std::optional<Sample> latest() const;
  // Samples taken and the CPU seconds the thread spent taking and writing
  // them.
  std::size_t samples_taken() const;
  double busy_seconds() const;
  bool nvml_loaded() const;
  const std::string& nvml_error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Folds one sample into a window (exposed for tests).
void accumulate(
    Window& w,
    const Sample& s,
    const std::string& gpu_uuid,
    const env::ProcessIdentity& me);
// Turns the sums accumulate() keeps into means.
Window finish(Window w);

} // namespace hotloop::telemetry
