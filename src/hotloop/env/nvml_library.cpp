#include "hotloop/env/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>

#include <fmt/format.h>

namespace hotloop::nvml {
namespace {

// First symbol of `names` the library exports (newer versioned names first), or
// nullptr.
template <typename Fn>
Fn resolve(void* handle, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* sym = ::dlsym(handle, name)) {
      return reinterpret_cast<Fn>(sym);
    }
  }
  return nullptr;
}

Functions resolve_all(void* h) {
  Functions f;
  f.init = resolve<InitFn>(h, {"nvmlInit_v2", "nvmlInit"});
  f.shutdown = resolve<ShutdownFn>(h, {"nvmlShutdown"});
  f.error_string = resolve<ErrorStringFn>(h, {"nvmlErrorString"});
  f.system_get_driver_version =
      resolve<SystemGetStringFn>(h, {"nvmlSystemGetDriverVersion"});
  f.system_get_cuda_driver_version = resolve<SystemGetIntFn>(
      h,
      {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  f.system_get_process_name =
      resolve<SystemGetProcessNameFn>(h, {"nvmlSystemGetProcessName"});
  f.device_get_count = resolve<DeviceGetCountFn>(
      h, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  f.device_get_handle_by_index = resolve<DeviceGetHandleByIndexFn>(
      h, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  f.device_get_name = resolve<DeviceGetStringFn>(h, {"nvmlDeviceGetName"});
  f.device_get_uuid = resolve<DeviceGetStringFn>(h, {"nvmlDeviceGetUUID"});
  f.device_get_memory_info =
      resolve<DeviceGetMemoryInfoFn>(h, {"nvmlDeviceGetMemoryInfo"});
  f.device_get_utilization_rates =
      resolve<DeviceGetUtilizationFn>(h, {"nvmlDeviceGetUtilizationRates"});
  f.device_get_temperature =
      resolve<DeviceGetTemperatureFn>(h, {"nvmlDeviceGetTemperature"});
  f.device_get_temperature_threshold =
      resolve<DeviceGetTemperatureFn>(h, {"nvmlDeviceGetTemperatureThreshold"});
  f.device_get_power_usage =
      resolve<DeviceGetUintFn>(h, {"nvmlDeviceGetPowerUsage"});
  f.device_get_enforced_power_limit =
      resolve<DeviceGetUintFn>(h, {"nvmlDeviceGetEnforcedPowerLimit"});
  f.device_get_clock_info =
      resolve<DeviceGetClockFn>(h, {"nvmlDeviceGetClockInfo"});
  f.device_get_max_clock_info =
      resolve<DeviceGetClockFn>(h, {"nvmlDeviceGetMaxClockInfo"});
  f.device_get_pcie_throughput =
      resolve<DeviceGetClockFn>(h, {"nvmlDeviceGetPcieThroughput"});
  // Renamed in CUDA 12.2's NVML; the old name stays exported by newer drivers.
  f.device_get_current_clocks_event_reasons = resolve<DeviceGetUllFn>(
      h,
      {"nvmlDeviceGetCurrentClocksEventReasons",
       "nvmlDeviceGetCurrentClocksThrottleReasons"});
  f.device_get_curr_pcie_link_generation =
      resolve<DeviceGetUintFn>(h, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  f.device_get_max_pcie_link_generation =
      resolve<DeviceGetUintFn>(h, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  f.device_get_curr_pcie_link_width =
      resolve<DeviceGetUintFn>(h, {"nvmlDeviceGetCurrPcieLinkWidth"});
  f.device_get_max_pcie_link_width =
      resolve<DeviceGetUintFn>(h, {"nvmlDeviceGetMaxPcieLinkWidth"});
  f.device_get_persistence_mode =
      resolve<DeviceGetEnableStateFn>(h, {"nvmlDeviceGetPersistenceMode"});
  f.device_get_mig_mode =
      resolve<DeviceGetMigModeFn>(h, {"nvmlDeviceGetMigMode"});
  f.device_get_cuda_compute_capability = resolve<DeviceGetComputeCapabilityFn>(
      h, {"nvmlDeviceGetCudaComputeCapability"});
  f.device_get_compute_running_processes = resolve<DeviceGetProcessesFn>(
      h,
      {"nvmlDeviceGetComputeRunningProcesses_v3",
       "nvmlDeviceGetComputeRunningProcesses_v2"});
  f.device_get_compute_running_processes_v1 = resolve<DeviceGetProcessesV1Fn>(
      h, {"nvmlDeviceGetComputeRunningProcesses"});
  f.device_get_process_utilization = resolve<DeviceGetProcessUtilizationFn>(
      h, {"nvmlDeviceGetProcessUtilization"});
  f.gpm_query_device_support =
      resolve<GpmQueryDeviceSupportFn>(h, {"nvmlGpmQueryDeviceSupport"});
  f.gpm_sample_alloc = resolve<GpmSampleAllocFn>(h, {"nvmlGpmSampleAlloc"});
  f.gpm_sample_free = resolve<GpmSampleFreeFn>(h, {"nvmlGpmSampleFree"});
  f.gpm_sample_get = resolve<GpmSampleGetFn>(h, {"nvmlGpmSampleGet"});
  f.gpm_metrics_get = resolve<GpmMetricsGetFn>(h, {"nvmlGpmMetricsGet"});
  return f;
}

} // namespace

std::string default_library_path() {
  const char* env = std::getenv("HOTLOOP_NVML_LIB");
  return (env != nullptr && *env != '\0') ? std::string(env)
                                          : std::string("libnvidia-ml.so.1");
}

std::unique_ptr<Library> Library::open(const std::string& path) {
  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw OpenError(
        fmt::format(
            "cannot load NVML from '{}': {}",
            path,
            why != nullptr ? why : "unknown dlopen error"),
        "install the NVIDIA driver (it provides libnvidia-ml.so.1), or set HOTLOOP_NVML_LIB to its path",
        /*library_found=*/false);
  }
  std::unique_ptr<Library> lib(new Library(handle, path));
  if (lib->fn_.init == nullptr) {
    throw OpenError(
        fmt::format("'{}' is not an NVML library: it has no nvmlInit", path),
        "point HOTLOOP_NVML_LIB at libnvidia-ml.so.1",
        /*library_found=*/true);
  }
  const Return rc = lib->fn_.init();
  if (rc != kSuccess) {
    lib->fn_.shutdown = nullptr; // nothing to shut down
    throw OpenError(
        fmt::format("nvmlInit failed ({}): {}", rc, lib->error_string(rc)),
        rc == kErrorDriverNotLoaded
            ? "the NVIDIA kernel module is not loaded: check `lsmod | grep nvidia` and dmesg"
            : rc == kErrorLibRmVersionMismatch
            ? "the driver library and the kernel module differ in version: reboot, or reload the module"
            : "check that the NVIDIA driver is installed and that `nvidia-smi` works",
        /*library_found=*/true);
  }
  return lib;
}

Library::Library(void* handle, std::string path)
    : handle_(handle), path_(std::move(path)), fn_(resolve_all(handle)) {}

Library::~Library() {
  if (fn_.shutdown != nullptr) {
    fn_.shutdown();
  }
  ::dlclose(handle_);
}

std::string Library::error_string(Return code) const {
  if (code == kErrorFunctionNotFound) {
    return "function missing from this NVML library (older driver?)";
  }
  if (fn_.error_string == nullptr) {
    return fmt::format("NVML error {}", code);
  }
  const char* text = fn_.error_string(code);
  return text != nullptr ? text : fmt::format("NVML error {}", code);
}

} // namespace hotloop::nvml
