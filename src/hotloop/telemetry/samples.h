#pragma once
// One reading of the machine: every GPU through NVML (utilization, memory,
// power, temperature, clocks, throttle reasons, PCIe throughput, processes)
// and the host (CPU utilization, this process's resident memory). A fact the
// driver does not give is left empty.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/env/gpu_probe.h"
#include "hotloop/telemetry/gpm.h"

namespace hotloop::nvml {
class Library;
}

namespace hotloop::telemetry {

struct GpuSample {
  unsigned int index = 0; // NVML's
  std::string uuid;
  std::string name;
  std::optional<unsigned int> util_percent; // SMs busy
  std::optional<unsigned int> memory_util_percent; // memory bus busy
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  std::optional<unsigned int> temperature_c;
  std::optional<unsigned int> slowdown_temperature_c;
  std::optional<unsigned int> sm_clock_mhz;
  std::optional<unsigned int> sm_clock_max_mhz;
  std::optional<unsigned int> memory_clock_mhz;
  std::optional<unsigned int> memory_clock_max_mhz;
  std::optional<std::uint64_t> throttle_reasons; // nvml::kThrottle* bits
  std::optional<double> pcie_tx_mb_s;
  std::optional<double> pcie_rx_mb_s;
  std::optional<std::vector<env::GpuProcess>> processes;
  // GPM counters since the previous sample (Hopper and later, with a
  // GpmSampler); gpm_skip says why there are none ("" while they work).
  std::optional<GpmMetrics> gpm;
  std::string gpm_skip;
};

struct HostSample {
  std::optional<double> cpu_percent; // all cores, since the previous reading
  std::uint64_t rss_bytes = 0; // this process
};

struct Sample {
  double unix_time = 0;
  std::vector<GpuSample> gpus;
  HostSample host;
};

// Reads every GPU the library sees, with `gpm`'s counters when given. Never
// throws.
std::vector<GpuSample> sample_gpus(
    const nvml::Library& lib,
    GpmSampler* gpm = nullptr);

// This process's resident memory (/proc/self/statm).
std::uint64_t process_rss_bytes();

// CPU utilization over the whole host from /proc/stat, between consecutive
// calls of percent() (the first call has no previous reading: nullopt).
class HostCpu {
 public:
  explicit HostCpu(std::string proc_stat = "/proc/stat");
  std::optional<double> percent();

 private:
  std::string path_;
  std::uint64_t busy_ = 0;
  std::uint64_t total_ = 0;
  bool have_ = false;
};

// The throttle reasons that slow a busy GPU (leaves out "GPU idle" and the
// clocks a user set on purpose).
std::uint64_t slowing_reasons(std::uint64_t mask);

nlohmann::json to_json(const GpuSample& g);
nlohmann::json to_json(const Sample& s);

} // namespace hotloop::telemetry
