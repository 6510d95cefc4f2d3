#pragma once
// The part of NVML's C ABI that hotloop uses, declared here so that hotloop
// builds without nvml.h (it ships with the driver or the CUDA toolkit, not with
// LibTorch) and loads libnvidia-ml.so.1 at run time with dlopen. Layouts and
// values are NVML's (stable since CUDA 11); tests/fakes/fake_nvml.cpp
// implements the same functions against this header.

#include <cstdint>

namespace hotloop::nvml {

using Return = int; // nvmlReturn_t
constexpr Return kSuccess = 0;
constexpr Return kErrorUninitialized = 1;
constexpr Return kErrorInvalidArgument = 2;
constexpr Return kErrorNotSupported = 3;
constexpr Return kErrorNoPermission = 4;
constexpr Return kErrorNotFound = 6;
constexpr Return kErrorInsufficientSize = 7;
constexpr Return kErrorDriverNotLoaded = 9;
constexpr Return kErrorFunctionNotFound = 13;
constexpr Return kErrorGpuIsLost = 15;
constexpr Return kErrorLibRmVersionMismatch = 18;
constexpr Return kErrorUnknown = 999;

struct DeviceOpaque;
using Device = DeviceOpaque*; // nvmlDevice_t

struct Memory { // nvmlMemory_t (v1), bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Utilization { // nvmlUtilization_t, percent over the last sample period
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfo { // nvmlProcessInfo_t (v2 layout, used by the _v2 and _v3
                     // process queries)
  unsigned int pid;
  unsigned long long usedGpuMemory; // bytes
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct ProcessInfoV1 { // nvmlProcessInfo_v1_t, used by the unversioned process
                       // query
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

struct ProcessUtilizationSample { // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timeStamp; // CPU time, microseconds since the epoch
  unsigned int smUtil; // percent of the period a kernel of this process ran
  unsigned int memUtil; // percent of the period its memory reads/writes ran
  unsigned int encUtil;
  unsigned int decUtil;
};

constexpr unsigned int kTemperatureGpu = 0; // NVML_TEMPERATURE_GPU
constexpr unsigned int kTemperatureThresholdShutdown = 0;
constexpr unsigned int kTemperatureThresholdSlowdown = 1;
constexpr unsigned int kClockGraphics = 0; // nvmlClockType_t
constexpr unsigned int kClockSm = 1;
constexpr unsigned int kClockMem = 2;
constexpr unsigned int kPcieTx = 0; // nvmlPcieUtilCounter_t, KB/s
constexpr unsigned int kPcieRx = 1;
constexpr unsigned int kBufferSize =
    96; // >= NVML_DEVICE_NAME_V2_BUFFER_SIZE, UUID and driver buffers

// Clock throttle ("clocks event") reasons, nvmlClocksThrottleReason*.
constexpr unsigned long long kThrottleGpuIdle = 0x1ULL;
constexpr unsigned long long kThrottleApplicationsClocksSetting = 0x2ULL;
constexpr unsigned long long kThrottleSwPowerCap = 0x4ULL;
constexpr unsigned long long kThrottleHwSlowdown = 0x8ULL;
constexpr unsigned long long kThrottleSyncBoost = 0x10ULL;
constexpr unsigned long long kThrottleSwThermalSlowdown = 0x20ULL;
constexpr unsigned long long kThrottleHwThermalSlowdown = 0x40ULL;
constexpr unsigned long long kThrottleHwPowerBrakeSlowdown = 0x80ULL;
constexpr unsigned long long kThrottleDisplayClockSetting = 0x100ULL;

// GPM (GPU performance monitoring, Hopper and later; NVML 12+): two samples
// of a device's counters give metrics over the time between them.
struct GpmSampleOpaque;
using GpmSample = GpmSampleOpaque*; // nvmlGpmSample_t
struct GpmSupport { // nvmlGpmSupport_t
  unsigned int version; // kGpmSupportVersion
  unsigned int isSupportedDevice;
};
struct GpmMetric { // nvmlGpmMetric_t
  unsigned int metricId;
  Return nvmlReturn; // this metric's status; value is valid when kSuccess
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
// nvmlGpmMetricsGet_t. The array is NVML_GPM_METRIC_MAX long in nvml.h (210
// in CUDA 13's, 98 in CUDA 12.0's) at the same version 1: the largest, so
// that a driver reading the whole struct stays inside it.
constexpr unsigned int kGpmMetricMax = 210;
struct GpmMetricsGet {
  unsigned int version; // kGpmMetricsGetVersion
  unsigned int numMetrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricMax];
};
constexpr unsigned int kGpmSupportVersion = 1;
constexpr unsigned int kGpmMetricsGetVersion = 1;
// nvmlGpmMetricId_t values hotloop reads.
constexpr unsigned int kGpmSmUtil = 2; // % of SMs busy
constexpr unsigned int kGpmSmOccupancy = 3; // % of warps active vs max
constexpr unsigned int kGpmAnyTensorUtil = 5; // % of time any tensor pipe ran
constexpr unsigned int kGpmHmmaTensorUtil = 7; // % of time HMMA ran
constexpr unsigned int kGpmDramBwUtil = 10; // % of DRAM bandwidth
constexpr unsigned int kGpmPcieTxPerSec = 20; // MiB/s
constexpr unsigned int kGpmPcieRxPerSec = 21;
constexpr unsigned int kGpmNvlinkTotalRxPerSec = 60; // MiB/s
constexpr unsigned int kGpmNvlinkTotalTxPerSec = 61;

// Function pointer types, named after the NVML functions they point to.
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetStringFn = Return (*)(char*, unsigned int);
using SystemGetIntFn = Return (*)(int*);
using SystemGetProcessNameFn = Return (*)(unsigned int, char*, unsigned int);
using DeviceGetCountFn = Return (*)(unsigned int*);
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);
using DeviceGetStringFn = Return (*)(Device, char*, unsigned int);
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
using DeviceGetUtilizationFn = Return (*)(Device, Utilization*);
using DeviceGetUintFn = Return (*)(Device, unsigned int*);
using DeviceGetTemperatureFn = Return (*)(Device, unsigned int, unsigned int*);
using DeviceGetClockFn = Return (*)(Device, unsigned int, unsigned int*);
using DeviceGetUllFn = Return (*)(Device, unsigned long long*);
using DeviceGetEnableStateFn =
    Return (*)(Device, int*); // nvmlEnableState_t: 0 off, 1 on
using DeviceGetMigModeFn = Return (*)(Device, unsigned int*, unsigned int*);
using DeviceGetComputeCapabilityFn = Return (*)(Device, int*, int*);
using DeviceGetProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);
using DeviceGetProcessesV1Fn =
    Return (*)(Device, unsigned int*, ProcessInfoV1*);
using DeviceGetProcessUtilizationFn = Return (*)(
    Device,
    ProcessUtilizationSample*,
    unsigned int*,
    unsigned long long);
using GpmQueryDeviceSupportFn = Return (*)(Device, GpmSupport*);
using GpmSampleAllocFn = Return (*)(GpmSample*);
using GpmSampleFreeFn = Return (*)(GpmSample);
using GpmSampleGetFn = Return (*)(Device, GpmSample);
using GpmMetricsGetFn = Return (*)(GpmMetricsGet*);

} // namespace hotloop::nvml
