#pragma once
// What NVML says about the driver and each GPU: the facts doctor's checks (and
// later the telemetry sampler) read. Probing only reads; it never changes a GPU
// setting.

#include <cstdint>
#include <string>
#include <vector>

#include "hotloop/env/probed.h"

#include "hotloop/env/nvml_api.h"

namespace hotloop::nvml {
class Library;
}

namespace hotloop::env {

struct GpuProcess {
  unsigned int pid = 0;
  std::string name; // from NVML, else /proc/<pid>/comm, else ""
  std::uint64_t used_bytes =
      0; // 0 when NVML cannot attribute memory (e.g. inside a container)
};

struct PcieLink {
  unsigned int generation = 0;
  unsigned int max_generation = 0;
  unsigned int width = 0;
  unsigned int max_width = 0;
};

struct GpuFacts {
  unsigned int index = 0; // NVML's index (PCI bus order, which CUDA's default
                          // order need not match)
  Probed<std::string> name;
  Probed<std::string> uuid; // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  Probed<std::uint64_t> memory_total_bytes;
  Probed<std::uint64_t> memory_used_bytes;
  Probed<std::uint64_t> memory_free_bytes;
  Probed<unsigned int>
      utilization_percent; // GPU busy over NVML's last sample period
  Probed<unsigned int> temperature_c;
  Probed<unsigned int>
      slowdown_temperature_c; // where the GPU starts to lower its clocks
  Probed<double> power_w;
  Probed<double> power_limit_w;
  Probed<unsigned int> sm_clock_mhz;
  Probed<unsigned int> sm_clock_max_mhz;
  Probed<std::uint64_t> throttle_reasons; // nvml::kThrottle* bit mask
  Probed<PcieLink> pcie;
  Probed<bool> persistence_mode;
  Probed<bool> mig_enabled;
  Probed<std::pair<int, int>> compute_capability; // (major, minor)
  Probed<std::vector<GpuProcess>>
      processes; // compute processes holding memory on this GPU
};

struct NvmlFacts {
  std::string library_path; // what was asked to load
  bool library_found = false; // the library could be dlopen'ed
  bool loaded = false; // ... and nvmlInit succeeded
  std::string load_error; // why not, when !loaded
  std::string load_hint; // how to fix it
  Probed<std::string> driver_version; // "580.159.04"
  Probed<int> cuda_driver_version; // the CUDA version the driver supports, as
                                   // 1000*major + 10*minor
  Probed<unsigned int> gpu_count;
  std::vector<GpuFacts> gpus;
};

// Loads NVML from `library_path` and reads every fact. Never throws: a library
// that does not load gives loaded=false with the reason; a function that fails
// gives a missing fact with NVML's reason.
NvmlFacts probe_nvml(const std::string& library_path);

// Reads every fact from an already open library.
NvmlFacts probe_nvml(const nvml::Library& lib);

// The compute processes on GPU `d`, with their names (NVML, else
// /proc/<pid>/comm).
Probed<std::vector<GpuProcess>> read_gpu_processes(
    const nvml::Library& lib,
    nvml::Device d);

// The throttle reason bits in words: {"GPU idle", "software power cap", ...}.
std::vector<std::string> throttle_reason_names(std::uint64_t mask);

// "13.0" from NVML's 13000.
std::string cuda_version_string(int version);

} // namespace hotloop::env
