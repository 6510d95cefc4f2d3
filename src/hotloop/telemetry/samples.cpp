#include "hotloop/telemetry/samples.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "hotloop/env/nvml_library.h"

namespace hotloop::telemetry {

namespace {

using nvml::call;
using nvml::kSuccess;

template <typename Fn>
std::optional<unsigned int> read_uint(Fn fn, nvml::Device d) {
  unsigned int v = 0;
  return call(fn, d, &v) == kSuccess ? std::optional<unsigned int>(v)
                                     : std::nullopt;
}

std::optional<unsigned int> read_clock(
    nvml::DeviceGetClockFn fn,
    nvml::Device d,
    unsigned int type) {
  unsigned int v = 0;
  return call(fn, d, type, &v) == kSuccess ? std::optional<unsigned int>(v)
                                           : std::nullopt;
}

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

} // namespace

std::vector<GpuSample> sample_gpus(const nvml::Library& lib, GpmSampler* gpm) {
  const auto& fn = lib.fn();
  std::vector<GpuSample> out;
  unsigned int count = 0;
  if (call(fn.device_get_count, &count) != kSuccess) {
    return out;
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device d = nullptr;
    if (call(fn.device_get_handle_by_index, i, &d) != kSuccess) {
      continue;
    }
    GpuSample g;
    g.index = i;
    char buf[nvml::kBufferSize] = {};
    if (call(fn.device_get_uuid, d, buf, nvml::kBufferSize) == kSuccess) {
      g.uuid = buf;
    }
    if (call(fn.device_get_name, d, buf, nvml::kBufferSize) == kSuccess) {
      g.name = buf;
    }
    nvml::Utilization u{};
    if (call(fn.device_get_utilization_rates, d, &u) == kSuccess) {
      g.util_percent = u.gpu;
      g.memory_util_percent = u.memory;
    }
    nvml::Memory m{};
    if (call(fn.device_get_memory_info, d, &m) == kSuccess) {
      g.memory_used_bytes = m.used;
      g.memory_total_bytes = m.total;
    }
    if (const auto mw = read_uint(fn.device_get_power_usage, d)) {
      g.power_w = *mw / 1000.0;
    }
    if (const auto mw = read_uint(fn.device_get_enforced_power_limit, d)) {
      g.power_limit_w = *mw / 1000.0;
    }
    unsigned int t = 0;
    if (call(fn.device_get_temperature, d, nvml::kTemperatureGpu, &t) ==
        kSuccess) {
      g.temperature_c = t;
    }
    if (call(
            fn.device_get_temperature_threshold,
            d,
            nvml::kTemperatureThresholdSlowdown,
            &t) == kSuccess) {
      g.slowdown_temperature_c = t;
    }
    g.sm_clock_mhz = read_clock(fn.device_get_clock_info, d, nvml::kClockSm);
    g.sm_clock_max_mhz =
        read_clock(fn.device_get_max_clock_info, d, nvml::kClockSm);
    g.memory_clock_mhz =
        read_clock(fn.device_get_clock_info, d, nvml::kClockMem);
    g.memory_clock_max_mhz =
        read_clock(fn.device_get_max_clock_info, d, nvml::kClockMem);
    unsigned long long reasons = 0;
    if (call(fn.device_get_current_clocks_event_reasons, d, &reasons) ==
        kSuccess) {
      g.throttle_reasons = reasons;
    }
    if (const auto kb =
            read_clock(fn.device_get_pcie_throughput, d, nvml::kPcieTx)) {
      g.pcie_tx_mb_s = *kb / 1000.0;
    }
    if (const auto kb =
            read_clock(fn.device_get_pcie_throughput, d, nvml::kPcieRx)) {
      g.pcie_rx_mb_s = *kb / 1000.0;
    }
    auto procs = env::read_gpu_processes(lib, d);
    if (procs.has_value()) {
      g.processes = *procs;
    }
    if (gpm != nullptr) {
      g.gpm = gpm->read(i, d);
      g.gpm_skip = gpm->skip_reason(i);
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::uint64_t process_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t size = 0;
  std::uint64_t resident = 0;
  in >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

HostCpu::HostCpu(std::string proc_stat) : path_(std::move(proc_stat)) {}

std::optional<double> HostCpu::percent() {
  std::ifstream in(path_);
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line);
  std::string cpu;
  fields >> cpu;
  if (cpu != "cpu") {
    return std::nullopt;
  }
  // user nice system idle iowait irq softirq steal
  std::uint64_t v[8] = {};
  for (auto& x : v) {
    fields >> x;
  }
  const std::uint64_t idle = v[3] + v[4];
  std::uint64_t total = 0;
  for (const auto x : v) {
    total += x;
  }
  const std::uint64_t busy = total - idle;
  std::optional<double> r;
  if (have_ && total > total_) {
    r = 100.0 * static_cast<double>(busy - busy_) /
        static_cast<double>(total - total_);
  }
  busy_ = busy;
  total_ = total;
  have_ = true;
  return r;
}

std::uint64_t slowing_reasons(std::uint64_t mask) {
  return mask &
      (nvml::kThrottleSwPowerCap | nvml::kThrottleHwSlowdown |
       nvml::kThrottleSwThermalSlowdown | nvml::kThrottleHwThermalSlowdown |
       nvml::kThrottleHwPowerBrakeSlowdown);
}

nlohmann::json to_json(const GpuSample& g) {
  nlohmann::json procs = nlohmann::json::array();
  if (g.processes) {
    for (const auto& p : *g.processes) {
      procs.push_back(
          {{"pid", p.pid}, {"name", p.name}, {"used_bytes", p.used_bytes}});
    }
  }
  nlohmann::json reasons = nlohmann::json::array();
  if (g.throttle_reasons) {
    for (const auto& r : env::throttle_reason_names(*g.throttle_reasons)) {
      reasons.push_back(r);
    }
  }
  return {
      {"index", g.index},
      {"uuid", g.uuid},
      {"name", g.name},
      {"util_percent", opt(g.util_percent)},
      {"memory_util_percent", opt(g.memory_util_percent)},
      {"memory_used_bytes", opt(g.memory_used_bytes)},
      {"memory_total_bytes", opt(g.memory_total_bytes)},
      {"power_w", opt(g.power_w)},
      {"power_limit_w", opt(g.power_limit_w)},
      {"temperature_c", opt(g.temperature_c)},
      {"sm_clock_mhz", opt(g.sm_clock_mhz)},
      {"sm_clock_max_mhz", opt(g.sm_clock_max_mhz)},
      {"memory_clock_mhz", opt(g.memory_clock_mhz)},
      {"throttle_reasons", reasons},
      {"pcie_tx_mb_s", opt(g.pcie_tx_mb_s)},
      {"pcie_rx_mb_s", opt(g.pcie_rx_mb_s)},
      {"processes", g.processes ? procs : nlohmann::json()},
      {"gpm", g.gpm ? to_json(*g.gpm) : nlohmann::json()},
      {"gpm_skip", g.gpm_skip}};
}

nlohmann::json to_json(const Sample& s) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : s.gpus) {
    gpus.push_back(to_json(g));
  }
  return {
      {"time", s.unix_time},
      {"gpus", gpus},
      {"host",
       {{"cpu_percent", opt(s.host.cpu_percent)},
        {"rss_bytes", s.host.rss_bytes}}}};
}

} // namespace hotloop::telemetry
