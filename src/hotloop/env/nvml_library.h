#pragma once
// libnvidia-ml loaded at run time. hotloop never links NVML: a machine without
// an NVIDIA driver must still run everything on the CPU, and `HOTLOOP_NVML_LIB`
// can point at another library (the tests' fake). A function the library lacks
// resolves to nullptr and calling it yields kErrorFunctionNotFound, so each
// fact that depends on it is skipped instead of crashing.

#include <memory>
#include <string>

#include "hotloop/env/nvml_api.h"
#include "hotloop/errors.h"

namespace hotloop::nvml {

// The library path to load: $HOTLOOP_NVML_LIB when set and non-empty, else
// "libnvidia-ml.so.1".
std::string default_library_path();

// Function table, resolved once at load time. Members are nullptr where the
// library lacks the symbol.
struct Functions {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  SystemGetStringFn system_get_driver_version = nullptr;
  SystemGetIntFn system_get_cuda_driver_version = nullptr;
  SystemGetProcessNameFn system_get_process_name = nullptr;
  DeviceGetCountFn device_get_count = nullptr;
  DeviceGetHandleByIndexFn device_get_handle_by_index = nullptr;
  DeviceGetStringFn device_get_name = nullptr;
  DeviceGetStringFn device_get_uuid = nullptr;
  DeviceGetMemoryInfoFn device_get_memory_info = nullptr;
  DeviceGetUtilizationFn device_get_utilization_rates = nullptr;
  DeviceGetTemperatureFn device_get_temperature = nullptr;
  DeviceGetTemperatureFn device_get_temperature_threshold = nullptr;
  DeviceGetUintFn device_get_power_usage = nullptr; // milliwatts
  DeviceGetUintFn device_get_enforced_power_limit = nullptr; // milliwatts
  DeviceGetClockFn device_get_clock_info = nullptr; // MHz
  DeviceGetClockFn device_get_max_clock_info = nullptr; // MHz
  DeviceGetClockFn device_get_pcie_throughput = nullptr; // KB/s, TX or RX
  DeviceGetUllFn device_get_current_clocks_event_reasons = nullptr;
  DeviceGetUintFn device_get_curr_pcie_link_generation = nullptr;
  DeviceGetUintFn device_get_max_pcie_link_generation = nullptr;
  DeviceGetUintFn device_get_curr_pcie_link_width = nullptr;
  DeviceGetUintFn device_get_max_pcie_link_width = nullptr;
  DeviceGetEnableStateFn device_get_persistence_mode = nullptr;
  DeviceGetMigModeFn device_get_mig_mode = nullptr;
  DeviceGetComputeCapabilityFn device_get_cuda_compute_capability = nullptr;
  DeviceGetProcessesFn device_get_compute_running_processes =
      nullptr; // _v3 or _v2
  DeviceGetProcessesV1Fn device_get_compute_running_processes_v1 = nullptr;
  DeviceGetProcessUtilizationFn device_get_process_utilization = nullptr;
  GpmQueryDeviceSupportFn gpm_query_device_support = nullptr;
  GpmSampleAllocFn gpm_sample_alloc = nullptr;
  GpmSampleFreeFn gpm_sample_free = nullptr;
  GpmSampleGetFn gpm_sample_get = nullptr;
  GpmMetricsGetFn gpm_metrics_get = nullptr;
};

// Library::open's failure: `library_found` tells a machine without a driver
// (the library is not there: a CPU-only machine) from a broken driver (the
// library loads but nvmlInit fails).
class OpenError : public EnvError {
 public:
  OpenError(const std::string& what, std::string hint, bool library_found)
      : EnvError(what, std::move(hint)), library_found(library_found) {}
  bool library_found;
};

// An open libnvidia-ml with an initialized NVML session; both are closed by the
// destructor.
class Library {
 public:
  // Loads the library at `path` and calls nvmlInit. Throws OpenError when the
  // library cannot be loaded (what() carries dlerror's text) or when nvmlInit
  // fails (with NVML's error string).
  static std::unique_ptr<Library> open(const std::string& path);

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const Functions& fn() const {
    return fn_;
  }
  const std::string& path() const {
    return path_;
  }
  // NVML's text for a return code ("Not Supported", ...), or "function not in
  // library".
  std::string error_string(Return code) const;

 private:
  Library(void* handle, std::string path);
  void* handle_;
  std::string path_;
  Functions fn_;
};

// Calls `f(args...)` when the library has it, else returns
// kErrorFunctionNotFound.
template <typename Fn, typename... Args>
Return call(Fn f, Args... args) {
  return f == nullptr ? kErrorFunctionNotFound : f(args...);
}

} // namespace hotloop::nvml
