#include "hotloop/env/gpu_probe.h"

#include <array>
#include <fstream>

#include <fmt/format.h>

#include "hotloop/env/nvml_library.h"
#include "hotloop/env/own_process.h"

namespace hotloop::env {
namespace {

using nvml::call;
using nvml::kSuccess;

template <typename T>
Probed<T> failed(const nvml::Library& lib, nvml::Return rc) {
  return Probed<T>::missing(lib.error_string(rc));
}

Probed<std::string> read_string(
    const nvml::Library& lib,
    nvml::DeviceGetStringFn f,
    nvml::Device d) {
  std::array<char, nvml::kBufferSize> buf{};
  const nvml::Return rc =
      call(f, d, buf.data(), static_cast<unsigned int>(buf.size()));
  return rc == kSuccess ? Probed<std::string>::of(buf.data())
                        : failed<std::string>(lib, rc);
}

Probed<unsigned int> read_uint(
    const nvml::Library& lib,
    nvml::DeviceGetUintFn f,
    nvml::Device d) {
  unsigned int v = 0;
  const nvml::Return rc = call(f, d, &v);
  return rc == kSuccess ? Probed<unsigned int>::of(v)
                        : failed<unsigned int>(lib, rc);
}

Probed<double> read_watts(
    const nvml::Library& lib,
    nvml::DeviceGetUintFn f,
    nvml::Device d) {
  const auto mw = read_uint(lib, f, d);
  return mw.has_value() ? Probed<double>::of(*mw / 1000.0)
                        : Probed<double>::missing(mw.missing_reason);
}

Probed<unsigned int> read_clock(
    const nvml::Library& lib,
    nvml::DeviceGetClockFn f,
    nvml::Device d) {
  unsigned int v = 0;
  const nvml::Return rc = call(f, d, nvml::kClockSm, &v);
  return rc == kSuccess ? Probed<unsigned int>::of(v)
                        : failed<unsigned int>(lib, rc);
}

std::string process_name(const nvml::Library& lib, unsigned int pid) {
  std::array<char, 256> buf{};
  if (call(
          lib.fn().system_get_process_name,
          pid,
          buf.data(),
          static_cast<unsigned int>(buf.size())) == kSuccess &&
      buf[0] != '\0') {
    return buf.data();
  }
  if (!pids_are_the_hosts()) {
    return {}; // NVML's pid is the host's: /proc here names another process
  }
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(comm, name);
  return name;
}

} // namespace

Probed<std::vector<GpuProcess>> read_gpu_processes(
    const nvml::Library& lib,
    nvml::Device d) {
  const auto& fn = lib.fn();
  std::vector<GpuProcess> out;
  // Ask with room for 64 processes; NVML says how many there are when that is
  // too few.
  for (unsigned int capacity = 64;; capacity *= 4) {
    unsigned int count = capacity;
    nvml::Return rc = nvml::kErrorFunctionNotFound;
    if (fn.device_get_compute_running_processes != nullptr) {
      std::vector<nvml::ProcessInfo> infos(capacity);
      rc = fn.device_get_compute_running_processes(d, &count, infos.data());
      if (rc == kSuccess) {
        for (unsigned int i = 0; i < count; ++i) {
          out.push_back({infos[i].pid, {}, infos[i].usedGpuMemory});
        }
      }
    } else if (fn.device_get_compute_running_processes_v1 != nullptr) {
      std::vector<nvml::ProcessInfoV1> infos(capacity);
      rc = fn.device_get_compute_running_processes_v1(d, &count, infos.data());
      if (rc == kSuccess) {
        for (unsigned int i = 0; i < count; ++i) {
          out.push_back({infos[i].pid, {}, infos[i].usedGpuMemory});
        }
      }
    }
    if (rc == nvml::kErrorInsufficientSize && capacity < 65536) {
      continue;
    }
    if (rc != kSuccess) {
      return failed<std::vector<GpuProcess>>(lib, rc);
    }
    break;
  }
  for (auto& p : out) {
    // NVML reports "not available" memory as all ones
    // (NVML_VALUE_NOT_AVAILABLE).
    if (p.used_bytes == ~0ULL) {
      p.used_bytes = 0;
    }
    p.name = process_name(lib, p.pid);
  }
  return Probed<std::vector<GpuProcess>>::of(std::move(out));
}

namespace {

GpuFacts probe_gpu(
    const nvml::Library& lib,
    unsigned int index,
    nvml::Device d) {
  const auto& fn = lib.fn();
  GpuFacts g;
  g.index = index;
  g.name = read_string(lib, fn.device_get_name, d);
  g.uuid = read_string(lib, fn.device_get_uuid, d);

  nvml::Memory mem{};
  if (const auto rc = call(fn.device_get_memory_info, d, &mem);
      rc == kSuccess) {
    g.memory_total_bytes = Probed<std::uint64_t>::of(mem.total);
    g.memory_used_bytes = Probed<std::uint64_t>::of(mem.used);
    g.memory_free_bytes = Probed<std::uint64_t>::of(mem.free);
  } else {
    g.memory_total_bytes = g.memory_used_bytes = g.memory_free_bytes =
        failed<std::uint64_t>(lib, rc);
  }

  nvml::Utilization util{};
  if (const auto rc = call(fn.device_get_utilization_rates, d, &util);
      rc == kSuccess) {
    g.utilization_percent = Probed<unsigned int>::of(util.gpu);
  } else {
    g.utilization_percent = failed<unsigned int>(lib, rc);
  }

  unsigned int temp = 0;
  const auto temp_rc =
      call(fn.device_get_temperature, d, nvml::kTemperatureGpu, &temp);
  g.temperature_c = temp_rc == kSuccess ? Probed<unsigned int>::of(temp)
                                        : failed<unsigned int>(lib, temp_rc);
  unsigned int slow = 0;
  const auto slow_rc = call(
      fn.device_get_temperature_threshold,
      d,
      nvml::kTemperatureThresholdSlowdown,
      &slow);
  g.slowdown_temperature_c = slow_rc == kSuccess
      ? Probed<unsigned int>::of(slow)
      : failed<unsigned int>(lib, slow_rc);

  g.power_w = read_watts(lib, fn.device_get_power_usage, d);
  g.power_limit_w = read_watts(lib, fn.device_get_enforced_power_limit, d);
  g.sm_clock_mhz = read_clock(lib, fn.device_get_clock_info, d);
  g.sm_clock_max_mhz = read_clock(lib, fn.device_get_max_clock_info, d);

  unsigned long long reasons = 0;
  const auto reasons_rc =
      call(fn.device_get_current_clocks_event_reasons, d, &reasons);
  g.throttle_reasons = reasons_rc == kSuccess
      ? Probed<std::uint64_t>::of(reasons)
      : failed<std::uint64_t>(lib, reasons_rc);

  const auto gen = read_uint(lib, fn.device_get_curr_pcie_link_generation, d);
  const auto max_gen =
      read_uint(lib, fn.device_get_max_pcie_link_generation, d);
  const auto width = read_uint(lib, fn.device_get_curr_pcie_link_width, d);
  const auto max_width = read_uint(lib, fn.device_get_max_pcie_link_width, d);
  if (gen.has_value() && max_gen.has_value() && width.has_value() &&
      max_width.has_value()) {
    g.pcie = Probed<PcieLink>::of({*gen, *max_gen, *width, *max_width});
  } else {
    for (const auto* p : {&gen, &max_gen, &width, &max_width}) {
      if (!p->has_value()) {
        g.pcie = Probed<PcieLink>::missing(p->missing_reason);
        break;
      }
    }
  }

  int persistence = 0;
  const auto pm_rc = call(fn.device_get_persistence_mode, d, &persistence);
  g.persistence_mode = pm_rc == kSuccess ? Probed<bool>::of(persistence == 1)
                                         : failed<bool>(lib, pm_rc);

  unsigned int mig_current = 0;
  unsigned int mig_pending = 0;
  const auto mig_rc =
      call(fn.device_get_mig_mode, d, &mig_current, &mig_pending);
  g.mig_enabled = mig_rc == kSuccess ? Probed<bool>::of(mig_current == 1)
                                     : failed<bool>(lib, mig_rc);

  int major = 0;
  int minor = 0;
  const auto cc_rc =
      call(fn.device_get_cuda_compute_capability, d, &major, &minor);
  g.compute_capability = cc_rc == kSuccess
      ? Probed<std::pair<int, int>>::of({major, minor})
      : failed<std::pair<int, int>>(lib, cc_rc);

  g.processes = read_gpu_processes(lib, d);
  return g;
}

} // namespace

NvmlFacts probe_nvml(const std::string& library_path) {
  std::unique_ptr<nvml::Library> lib;
  try {
    lib = nvml::Library::open(library_path);
  } catch (const nvml::OpenError& e) {
    NvmlFacts facts;
    facts.library_path = library_path;
    facts.library_found = e.library_found;
    facts.load_error = e.what();
    facts.load_hint = e.hint();
    return facts;
  }
  return probe_nvml(*lib);
}

NvmlFacts probe_nvml(const nvml::Library& lib) {
  const auto& fn = lib.fn();
  NvmlFacts facts;
  facts.library_path = lib.path();
  facts.library_found = true;
  facts.loaded = true;

  std::array<char, nvml::kBufferSize> buf{};
  const auto drv_rc = call(
      fn.system_get_driver_version,
      buf.data(),
      static_cast<unsigned int>(buf.size()));
  facts.driver_version = drv_rc == kSuccess
      ? Probed<std::string>::of(buf.data())
      : Probed<std::string>::missing(lib.error_string(drv_rc));
  int cuda = 0;
  const auto cuda_rc = call(fn.system_get_cuda_driver_version, &cuda);
  facts.cuda_driver_version = cuda_rc == kSuccess
      ? Probed<int>::of(cuda)
      : Probed<int>::missing(lib.error_string(cuda_rc));

  unsigned int count = 0;
  const auto count_rc = call(fn.device_get_count, &count);
  if (count_rc != kSuccess) {
    facts.gpu_count = Probed<unsigned int>::missing(lib.error_string(count_rc));
    return facts;
  }
  facts.gpu_count = Probed<unsigned int>::of(count);
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device d = nullptr;
    const auto rc = call(fn.device_get_handle_by_index, i, &d);
    if (rc != kSuccess) {
      GpuFacts g;
      g.index = i;
      g.name = Probed<std::string>::missing(
          fmt::format("no handle for GPU {}: {}", i, lib.error_string(rc)));
      facts.gpus.push_back(std::move(g));
      continue;
    }
    facts.gpus.push_back(probe_gpu(lib, i, d));
  }
  return facts;
}

std::vector<std::string> throttle_reason_names(std::uint64_t mask) {
  static constexpr std::pair<std::uint64_t, const char*> kNames[] = {
      {nvml::kThrottleGpuIdle, "GPU idle"},
      {nvml::kThrottleApplicationsClocksSetting, "application clocks setting"},
      {nvml::kThrottleSwPowerCap, "software power cap"},
      {nvml::kThrottleHwSlowdown, "hardware slowdown"},
      {nvml::kThrottleSyncBoost, "sync boost"},
      {nvml::kThrottleSwThermalSlowdown, "software thermal slowdown"},
      {nvml::kThrottleHwThermalSlowdown, "hardware thermal slowdown"},
      {nvml::kThrottleHwPowerBrakeSlowdown, "hardware power brake"},
      {nvml::kThrottleDisplayClockSetting, "display clock setting"},
  };
  std::vector<std::string> names;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if ((mask & bit) != 0) {
      names.emplace_back(name);
    }
  }
  if ((mask & ~known) != 0) {
    names.push_back(fmt::format("other (0x{:x})", mask & ~known));
  }
  return names;
}

std::string cuda_version_string(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

} // namespace hotloop::env
