// hotloop declares the part of NVML it uses in src/hotloop/env/nvml_api.h, and
// the fake NVML library implements the same header, so a wrong layout there
// would be copied into the fake and pass every other test. This file pins
// each struct's size, alignment and field offsets, and each constant, to
// NVIDIA's own nvml.h (pip's nvidia-nvml-dev, which scripts/setup installs,
// or a CUDA toolkit's). It is checked when it compiles; the program only says
// which header it was checked against.
#include <nvml.h>

#include <cstddef>
#include <cstdio>

#include "hotloop/env/nvml_api.h"

namespace nv = hotloop::nvml;

#define HOTLOOP_SAME_LAYOUT(ours, theirs)                       \
  static_assert(sizeof(ours) == sizeof(theirs), #ours " size"); \
  static_assert(alignof(ours) == alignof(theirs), #ours " alignment")
#define HOTLOOP_SAME_FIELD(ours, theirs, field)                             \
  static_assert(                                                            \
      offsetof(ours, field) == offsetof(theirs, field), #ours "::" #field); \
  static_assert(                                                            \
      sizeof(ours::field) == sizeof(theirs::field), #ours "::" #field " size")

HOTLOOP_SAME_LAYOUT(nv::Memory, nvmlMemory_t);
HOTLOOP_SAME_FIELD(nv::Memory, nvmlMemory_t, total);
HOTLOOP_SAME_FIELD(nv::Memory, nvmlMemory_t, free);
HOTLOOP_SAME_FIELD(nv::Memory, nvmlMemory_t, used);

HOTLOOP_SAME_LAYOUT(nv::Utilization, nvmlUtilization_t);
HOTLOOP_SAME_FIELD(nv::Utilization, nvmlUtilization_t, gpu);
HOTLOOP_SAME_FIELD(nv::Utilization, nvmlUtilization_t, memory);

HOTLOOP_SAME_LAYOUT(nv::ProcessInfo, nvmlProcessInfo_v2_t);
HOTLOOP_SAME_FIELD(nv::ProcessInfo, nvmlProcessInfo_v2_t, pid);
HOTLOOP_SAME_FIELD(nv::ProcessInfo, nvmlProcessInfo_v2_t, usedGpuMemory);
HOTLOOP_SAME_FIELD(nv::ProcessInfo, nvmlProcessInfo_v2_t, gpuInstanceId);
HOTLOOP_SAME_FIELD(nv::ProcessInfo, nvmlProcessInfo_v2_t, computeInstanceId);

HOTLOOP_SAME_LAYOUT(nv::ProcessInfoV1, nvmlProcessInfo_v1_t);
HOTLOOP_SAME_FIELD(nv::ProcessInfoV1, nvmlProcessInfo_v1_t, pid);
HOTLOOP_SAME_FIELD(nv::ProcessInfoV1, nvmlProcessInfo_v1_t, usedGpuMemory);

HOTLOOP_SAME_LAYOUT(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t);
HOTLOOP_SAME_FIELD(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t,
    pid);
HOTLOOP_SAME_FIELD(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t,
    timeStamp);
HOTLOOP_SAME_FIELD(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t,
    smUtil);
HOTLOOP_SAME_FIELD(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t,
    memUtil);
HOTLOOP_SAME_FIELD(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t,
    encUtil);
HOTLOOP_SAME_FIELD(
    nv::ProcessUtilizationSample,
    nvmlProcessUtilizationSample_t,
    decUtil);

HOTLOOP_SAME_LAYOUT(nv::GpmSupport, nvmlGpmSupport_t);
HOTLOOP_SAME_FIELD(nv::GpmSupport, nvmlGpmSupport_t, version);
HOTLOOP_SAME_FIELD(nv::GpmSupport, nvmlGpmSupport_t, isSupportedDevice);

HOTLOOP_SAME_LAYOUT(nv::GpmMetric, nvmlGpmMetric_t);
HOTLOOP_SAME_FIELD(nv::GpmMetric, nvmlGpmMetric_t, metricId);
HOTLOOP_SAME_FIELD(nv::GpmMetric, nvmlGpmMetric_t, nvmlReturn);
HOTLOOP_SAME_FIELD(nv::GpmMetric, nvmlGpmMetric_t, value);
HOTLOOP_SAME_FIELD(nv::GpmMetric, nvmlGpmMetric_t, metricInfo);

// The array's length is the header's NVML_GPM_METRIC_MAX (at least that of
// the newest header, so a driver reading the whole struct stays inside it).
HOTLOOP_SAME_LAYOUT(nv::GpmMetricsGet, nvmlGpmMetricsGet_t);
HOTLOOP_SAME_FIELD(nv::GpmMetricsGet, nvmlGpmMetricsGet_t, version);
HOTLOOP_SAME_FIELD(nv::GpmMetricsGet, nvmlGpmMetricsGet_t, numMetrics);
HOTLOOP_SAME_FIELD(nv::GpmMetricsGet, nvmlGpmMetricsGet_t, sample1);
HOTLOOP_SAME_FIELD(nv::GpmMetricsGet, nvmlGpmMetricsGet_t, sample2);
HOTLOOP_SAME_FIELD(nv::GpmMetricsGet, nvmlGpmMetricsGet_t, metrics);
static_assert(sizeof(nv::GpmSample) == sizeof(nvmlGpmSample_t));
static_assert(nv::kGpmMetricMax == NVML_GPM_METRIC_MAX);
static_assert(nv::kGpmSupportVersion == NVML_GPM_SUPPORT_VERSION);
static_assert(nv::kGpmMetricsGetVersion == NVML_GPM_METRICS_GET_VERSION);
static_assert(nv::kGpmSmUtil == NVML_GPM_METRIC_SM_UTIL);
static_assert(nv::kGpmSmOccupancy == NVML_GPM_METRIC_SM_OCCUPANCY);
static_assert(nv::kGpmAnyTensorUtil == NVML_GPM_METRIC_ANY_TENSOR_UTIL);
static_assert(nv::kGpmHmmaTensorUtil == NVML_GPM_METRIC_HMMA_TENSOR_UTIL);
static_assert(nv::kGpmDramBwUtil == NVML_GPM_METRIC_DRAM_BW_UTIL);
static_assert(nv::kGpmPcieTxPerSec == NVML_GPM_METRIC_PCIE_TX_PER_SEC);
static_assert(nv::kGpmPcieRxPerSec == NVML_GPM_METRIC_PCIE_RX_PER_SEC);
static_assert(
    nv::kGpmNvlinkTotalRxPerSec == NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC);
static_assert(
    nv::kGpmNvlinkTotalTxPerSec == NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC);

static_assert(sizeof(nv::Return) == sizeof(nvmlReturn_t));
static_assert(sizeof(nv::Device) == sizeof(nvmlDevice_t));
static_assert(nv::kSuccess == NVML_SUCCESS);
static_assert(nv::kErrorUninitialized == NVML_ERROR_UNINITIALIZED);
static_assert(nv::kErrorInvalidArgument == NVML_ERROR_INVALID_ARGUMENT);
static_assert(nv::kErrorNotSupported == NVML_ERROR_NOT_SUPPORTED);
static_assert(nv::kErrorNoPermission == NVML_ERROR_NO_PERMISSION);
static_assert(nv::kErrorNotFound == NVML_ERROR_NOT_FOUND);
static_assert(nv::kErrorInsufficientSize == NVML_ERROR_INSUFFICIENT_SIZE);
static_assert(nv::kErrorDriverNotLoaded == NVML_ERROR_DRIVER_NOT_LOADED);
static_assert(nv::kErrorFunctionNotFound == NVML_ERROR_FUNCTION_NOT_FOUND);
static_assert(nv::kErrorGpuIsLost == NVML_ERROR_GPU_IS_LOST);
static_assert(
    nv::kErrorLibRmVersionMismatch == NVML_ERROR_LIB_RM_VERSION_MISMATCH);
static_assert(nv::kErrorUnknown == NVML_ERROR_UNKNOWN);

static_assert(nv::kTemperatureGpu == NVML_TEMPERATURE_GPU);
static_assert(
    nv::kTemperatureThresholdShutdown == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN);
static_assert(
    nv::kTemperatureThresholdSlowdown == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN);
static_assert(nv::kClockGraphics == NVML_CLOCK_GRAPHICS);
static_assert(nv::kClockSm == NVML_CLOCK_SM);
static_assert(nv::kClockMem == NVML_CLOCK_MEM);
static_assert(nv::kPcieTx == NVML_PCIE_UTIL_TX_BYTES);
static_assert(nv::kPcieRx == NVML_PCIE_UTIL_RX_BYTES);
static_assert(nv::kBufferSize >= NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(nv::kBufferSize >= NVML_DEVICE_UUID_V2_BUFFER_SIZE);
static_assert(nv::kBufferSize >= NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
static_assert(nv::kBufferSize >= NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);

static_assert(nv::kThrottleGpuIdle == nvmlClocksThrottleReasonGpuIdle);
static_assert(
    nv::kThrottleApplicationsClocksSetting ==
    nvmlClocksThrottleReasonApplicationsClocksSetting);
static_assert(nv::kThrottleSwPowerCap == nvmlClocksThrottleReasonSwPowerCap);
static_assert(nv::kThrottleHwSlowdown == nvmlClocksThrottleReasonHwSlowdown);
static_assert(nv::kThrottleSyncBoost == nvmlClocksThrottleReasonSyncBoost);
static_assert(
    nv::kThrottleSwThermalSlowdown ==
    nvmlClocksThrottleReasonSwThermalSlowdown);
static_assert(
    nv::kThrottleHwThermalSlowdown ==
    nvmlClocksThrottleReasonHwThermalSlowdown);
static_assert(
    nv::kThrottleHwPowerBrakeSlowdown ==
    nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
static_assert(
    nv::kThrottleDisplayClockSetting ==
    nvmlClocksThrottleReasonDisplayClockSetting);

int main() {
  std::printf(
      "nvml_api.h: %d structs and their fields, the return codes, clock, "
      "temperature, PCIe, throttle-reason and GPM constants match %s\n",
      7,
      HOTLOOP_CHECKED_HEADER);
  return 0;
}
