// A fake libnvidia-ml for tests on machines without a GPU. hotloop loads it
// through HOTLOOP_NVML_LIB exactly as it loads the real library (dlopen +
// dlsym), so the product code under test is the real loader and the real
// checks; only the hardware is simulated.
//
// The scenario is a JSON file named by FAKE_NVML_SCENARIO, read at every
// nvmlInit (so one test process can switch scenarios). See
// tests/fakes/scenarios/ for the format. A function named in a GPU's
// "not_supported" list returns NVML_ERROR_NOT_SUPPORTED. Built twice: fake_nvml
// exports every function hotloop can use; fake_nvml_old (FAKE_NVML_OLD_DRIVER)
// exports only what an old driver had, so the newer functions are missing from
// the library altogether.

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "hotloop/env/nvml_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace hotloop::nvml;
using nlohmann::json;

struct State {
  json scenario;
  bool initialized = false;
  unsigned long long memory_reads = 0;
  unsigned long long utilization_reads = 0;
};

State& state() {
  static State s; // the fake stands in for a driver, which is process-wide
                  // state by nature
  return s;
}

const json* gpu(Device d) {
  const auto index = reinterpret_cast<std::uintptr_t>(d);
  const auto& gpus = state().scenario["gpus"];
  if (!state().initialized || index == 0 || index > gpus.size()) {
    return nullptr;
  }
  return &gpus[index - 1];
}

bool not_supported(const json& g, const char* function) {
  if (!g.contains("not_supported")) {
    return false;
  }
  for (const auto& name : g["not_supported"]) {
    if (name == function) {
      return true;
    }
  }
  return false;
}

Return copy_string(const std::string& value, char* out, unsigned int length) {
  if (value.size() + 1 > length) {
    return kErrorInsufficientSize;
  }
  std::memcpy(out, value.c_str(), value.size() + 1);
  return kSuccess;
}

// Looks up gpu `d` and checks `function` is supported; returns nullptr and sets
// rc otherwise.
const json* lookup(Device d, const char* function, Return& rc) {
  const json* g = gpu(d);
  if (g == nullptr) {
    rc = state().initialized ? kErrorInvalidArgument : kErrorUninitialized;
    return nullptr;
  }
  if (not_supported(*g, function)) {
    rc = kErrorNotSupported;
    return nullptr;
  }
  rc = kSuccess;
  return g;
}

template <typename T>
Return read_uint(Device d, const char* function, const char* key, T* out) {
  Return rc;
  const json* g = lookup(d, function, rc);
  if (g == nullptr) {
    return rc;
  }
  if (!g->contains(key)) {
    return kErrorNotSupported;
  }
  *out = (*g)[key].get<T>();
  return kSuccess;
}

// The first (lowest) pid whose parent is the process that loaded the fake:
// `hotloop watch`'s job. 0 when it has none.
unsigned int first_child() {
  const long self = ::getpid();
  unsigned int best = 0;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) {
    return 0;
  }
  while (const dirent* e = ::readdir(dir)) {
    const unsigned long pid = std::strtoul(e->d_name, nullptr, 10);
    if (pid == 0) {
      continue;
    }
    std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
      continue;
    }
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == self && (best == 0 || pid < best)) {
      best = static_cast<unsigned int>(pid);
    }
  }
  ::closedir(dir);
  return best;
}

// A scenario's processes with their pids resolved: a number, or "child"
// (the loading process's first child; left out while it has none).
json resolved_processes(const json& g) {
  json out = json::array();
  for (json p : g.value("processes", json::array())) {
    if (p["pid"].is_string()) {
      p["pid"] = p["pid"] == "child" ? first_child() : 0U;
      if (p["pid"] == 0U) {
        continue;
      }
    }
    out.push_back(p);
  }
  return out;
}

Return processes(Device d, unsigned int* count, auto* infos) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetComputeRunningProcesses", rc);
  if (g == nullptr) {
    return rc;
  }
  const json procs = resolved_processes(*g);
  if (procs.size() > *count) {
    *count = static_cast<unsigned int>(procs.size());
    return kErrorInsufficientSize;
  }
  *count = static_cast<unsigned int>(procs.size());
  for (std::size_t i = 0; i < procs.size(); ++i) {
    std::memset(&infos[i], 0, sizeof(infos[i]));
    infos[i].pid = procs[i]["pid"].get<unsigned int>();
    infos[i].usedGpuMemory = procs[i]["used"].get<unsigned long long>();
  }
  return kSuccess;
}

} // namespace

FAKE_EXPORT Return nvmlInit_v2() {
  const char* path = std::getenv("FAKE_NVML_SCENARIO");
  if (path == nullptr) {
    return kErrorDriverNotLoaded;
  }
  std::ifstream in(path);
  if (!in) {
    return kErrorDriverNotLoaded;
  }
  state().scenario = json::parse(in);
  state().memory_reads = 0;
  state().utilization_reads = 0;
  const int init = state().scenario.value("init_error", 0);
  state().initialized = init == 0;
  return init;
}

FAKE_EXPORT Return nvmlShutdown() {
  state().initialized = false;
  return kSuccess;
}

FAKE_EXPORT const char* nvmlErrorString(Return rc) {
  switch (rc) {
    case kSuccess:
      return "Success";
    case kErrorUninitialized:
      return "Uninitialized";
    case kErrorInvalidArgument:
      return "Invalid Argument";
    case kErrorNotSupported:
      return "Not Supported";
    case kErrorInsufficientSize:
      return "Insufficient Size";
    case kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kErrorLibRmVersionMismatch:
      return "RM has detected an NVML/RM version mismatch.";
    default:
      return "Unknown Error";
  }
}

FAKE_EXPORT Return nvmlSystemGetDriverVersion(char* out, unsigned int length) {
  return copy_string(
      state().scenario.value("driver_version", "000.00"), out, length);
}

FAKE_EXPORT Return nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!state().initialized) {
    return kErrorUninitialized;
  }
  *count = static_cast<unsigned int>(state().scenario["gpus"].size());
  return kSuccess;
}

FAKE_EXPORT Return
nvmlDeviceGetHandleByIndex_v2(unsigned int index, Device* device) {
  if (!state().initialized) {
    return kErrorUninitialized;
  }
  if (index >= state().scenario["gpus"].size()) {
    return kErrorInvalidArgument;
  }
  *device = reinterpret_cast<Device>(static_cast<std::uintptr_t>(index) + 1);
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetName(Device d, char* out, unsigned int length) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetName", rc);
  return g == nullptr
      ? rc
      : copy_string(g->value("name", "NVIDIA Fake GPU"), out, length);
}

FAKE_EXPORT Return nvmlDeviceGetUUID(Device d, char* out, unsigned int length) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetUUID", rc);
  return g == nullptr
      ? rc
      : copy_string(
            g->value("uuid", "GPU-00000000-0000-0000-0000-000000000000"),
            out,
            length);
}

FAKE_EXPORT Return nvmlDeviceGetMemoryInfo(Device d, Memory* memory) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetMemoryInfo", rc);
  if (g == nullptr) {
    return rc;
  }
  // "memory_growth_per_read": the used memory rises by this much at every
  // read (a leaking process, for telemetry's memory-growth verdict).
  memory->total = (*g)["memory_total"].get<unsigned long long>();
  memory->used = (*g)["memory_used"].get<unsigned long long>() +
      state().memory_reads++ * g->value("memory_growth_per_read", 0ULL);
  memory->free = memory->total - memory->used;
  return kSuccess;
}

FAKE_EXPORT Return
nvmlDeviceGetTemperature(Device d, unsigned int sensor, unsigned int* out) {
  return sensor == kTemperatureGpu
      ? read_uint(d, "nvmlDeviceGetTemperature", "temperature", out)
      : kErrorInvalidArgument;
}

FAKE_EXPORT Return nvmlDeviceGetPowerUsage(Device d, unsigned int* out) {
  return read_uint(d, "nvmlDeviceGetPowerUsage", "power_mw", out);
}

FAKE_EXPORT Return
nvmlDeviceGetClockInfo(Device d, unsigned int type, unsigned int* out) {
  return type == kClockSm
      ? read_uint(d, "nvmlDeviceGetClockInfo", "sm_clock", out)
      : (type == kClockMem
             ? read_uint(d, "nvmlDeviceGetClockInfo", "mem_clock", out)
             : kErrorNotSupported);
}

FAKE_EXPORT Return nvmlDeviceGetPersistenceMode(Device d, int* out) {
  return read_uint(d, "nvmlDeviceGetPersistenceMode", "persistence", out);
}

// The unversioned process query with the v1 struct: every driver has it.
FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses(
    Device d,
    unsigned int* count,
    ProcessInfoV1* infos) {
  return processes(d, count, infos);
}

#ifndef FAKE_NVML_OLD_DRIVER

FAKE_EXPORT Return nvmlSystemGetCudaDriverVersion_v2(int* out) {
  if (!state().scenario.contains("cuda_driver_version")) {
    return kErrorNotSupported;
  }
  *out = state().scenario["cuda_driver_version"].get<int>();
  return kSuccess;
}

FAKE_EXPORT Return
nvmlSystemGetProcessName(unsigned int pid, char* out, unsigned int length) {
  for (const auto& g : state().scenario["gpus"]) {
    for (const auto& p : resolved_processes(g)) {
      if (p["pid"].get<unsigned int>() == pid) {
        return copy_string(p.value("name", ""), out, length);
      }
    }
  }
  return kErrorNotFound;
}

FAKE_EXPORT Return nvmlDeviceGetUtilizationRates(Device d, Utilization* out) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetUtilizationRates", rc);
  if (g == nullptr) {
    return rc;
  }
  if (!g->contains("utilization")) {
    return kErrorNotSupported;
  }
  // An array: one value per read, the last one held (a window's mean then
  // differs from its last sample).
  const json& u = (*g)["utilization"];
  if (u.is_array()) {
    const auto i = std::min<std::size_t>(
        static_cast<std::size_t>(state().utilization_reads++), u.size() - 1);
    out->gpu = u[i].get<unsigned int>();
  } else {
    out->gpu = u.get<unsigned int>();
  }
  out->memory = g->value("utilization_memory", 0U);
  return kSuccess;
}

// One sample per process with an "sm" value (its SM share, percent; "mem"
// its memory share), stamped now; none newer than last_seen: NOT_FOUND.
FAKE_EXPORT Return nvmlDeviceGetProcessUtilization(
    Device d,
    ProcessUtilizationSample* out,
    unsigned int* count,
    unsigned long long last_seen) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetProcessUtilization", rc);
  if (g == nullptr) {
    return rc;
  }
  const auto now = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  json busy = json::array();
  for (const auto& p : resolved_processes(*g)) {
    if (p.contains("sm")) {
      busy.push_back(p);
    }
  }
  if (busy.empty() || now <= last_seen) {
    return kErrorNotFound;
  }
  if (out == nullptr || *count < busy.size()) {
    *count = static_cast<unsigned int>(busy.size());
    return kErrorInsufficientSize;
  }
  *count = static_cast<unsigned int>(busy.size());
  for (std::size_t i = 0; i < busy.size(); ++i) {
    out[i] = {};
    out[i].pid = busy[i]["pid"].get<unsigned int>();
    out[i].timeStamp = now;
    out[i].smUtil = busy[i]["sm"].get<unsigned int>();
    out[i].memUtil = busy[i].value("mem", 0U);
  }
  return kSuccess;
}

// counter 0: TX, 1: RX, in KB/s.
FAKE_EXPORT Return
nvmlDeviceGetPcieThroughput(Device d, unsigned int counter, unsigned int* out) {
  return read_uint(
      d,
      "nvmlDeviceGetPcieThroughput",
      counter == 0 ? "pcie_tx_kbps" : "pcie_rx_kbps",
      out);
}

FAKE_EXPORT Return nvmlDeviceGetTemperatureThreshold(
    Device d,
    unsigned int type,
    unsigned int* out) {
  return type == kTemperatureThresholdSlowdown
      ? read_uint(
            d, "nvmlDeviceGetTemperatureThreshold", "slowdown_temperature", out)
      : kErrorNotSupported;
}

FAKE_EXPORT Return
nvmlDeviceGetEnforcedPowerLimit(Device d, unsigned int* out) {
  return read_uint(d, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_mw", out);
}

FAKE_EXPORT Return
nvmlDeviceGetMaxClockInfo(Device d, unsigned int type, unsigned int* out) {
  return type == kClockSm
      ? read_uint(d, "nvmlDeviceGetMaxClockInfo", "sm_clock_max", out)
      : (type == kClockMem
             ? read_uint(d, "nvmlDeviceGetMaxClockInfo", "mem_clock_max", out)
             : kErrorNotSupported);
}

FAKE_EXPORT Return
nvmlDeviceGetCurrentClocksEventReasons(Device d, unsigned long long* out) {
  return read_uint(
      d, "nvmlDeviceGetCurrentClocksEventReasons", "throttle_reasons", out);
}

FAKE_EXPORT Return
nvmlDeviceGetCurrPcieLinkGeneration(Device d, unsigned int* out) {
  return read_uint(d, "nvmlDeviceGetCurrPcieLinkGeneration", "pcie_gen", out);
}

FAKE_EXPORT Return
nvmlDeviceGetMaxPcieLinkGeneration(Device d, unsigned int* out) {
  return read_uint(
      d, "nvmlDeviceGetMaxPcieLinkGeneration", "pcie_max_gen", out);
}

FAKE_EXPORT Return nvmlDeviceGetCurrPcieLinkWidth(Device d, unsigned int* out) {
  return read_uint(d, "nvmlDeviceGetCurrPcieLinkWidth", "pcie_width", out);
}

FAKE_EXPORT Return nvmlDeviceGetMaxPcieLinkWidth(Device d, unsigned int* out) {
  return read_uint(d, "nvmlDeviceGetMaxPcieLinkWidth", "pcie_max_width", out);
}

FAKE_EXPORT Return
nvmlDeviceGetMigMode(Device d, unsigned int* current, unsigned int* pending) {
  const Return rc = read_uint(d, "nvmlDeviceGetMigMode", "mig", current);
  if (rc == kSuccess) {
    *pending = *current;
  }
  return rc;
}

FAKE_EXPORT Return
nvmlDeviceGetCudaComputeCapability(Device d, int* major, int* minor) {
  Return rc;
  const json* g = lookup(d, "nvmlDeviceGetCudaComputeCapability", rc);
  if (g == nullptr) {
    return rc;
  }
  *major = (*g)["compute_capability"][0].get<int>();
  *minor = (*g)["compute_capability"][1].get<int>();
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v3(
    Device d,
    unsigned int* count,
    ProcessInfo* infos) {
  return processes(d, count, infos);
}

// GPM: a GPU whose scenario has a "gpm" object supports it; its values are
// what every pair of samples measures.
struct FakeGpmSample {
  std::uintptr_t device = 0;
  unsigned long long serial = 0; // taken in this order
};

const char* gpm_key(unsigned int metric) {
  switch (metric) {
    case kGpmSmUtil:
      return "sm_active";
    case kGpmSmOccupancy:
      return "sm_occupancy";
    case kGpmAnyTensorUtil:
      return "tensor_active";
    case kGpmHmmaTensorUtil:
      return "hmma_active";
    case kGpmDramBwUtil:
      return "dram_bw";
    case kGpmPcieTxPerSec:
      return "pcie_tx_mib_s";
    case kGpmPcieRxPerSec:
      return "pcie_rx_mib_s";
    case kGpmNvlinkTotalTxPerSec:
      return "nvlink_tx_mib_s";
    case kGpmNvlinkTotalRxPerSec:
      return "nvlink_rx_mib_s";
    default:
      return nullptr;
  }
}

FAKE_EXPORT Return nvmlGpmQueryDeviceSupport(Device d, GpmSupport* out) {
  Return rc;
  const json* g = lookup(d, "nvmlGpmQueryDeviceSupport", rc);
  if (g == nullptr) {
    return rc;
  }
  if (out == nullptr || out->version != kGpmSupportVersion) {
    return kErrorInvalidArgument;
  }
  out->isSupportedDevice = g->contains("gpm") ? 1 : 0;
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmSampleAlloc(GpmSample* out) {
  *out = reinterpret_cast<GpmSample>(new FakeGpmSample{});
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmSampleFree(GpmSample s) {
  delete reinterpret_cast<FakeGpmSample*>(s);
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmSampleGet(Device d, GpmSample s) {
  Return rc;
  const json* g = lookup(d, "nvmlGpmSampleGet", rc);
  if (g == nullptr) {
    return rc;
  }
  if (!g->contains("gpm")) {
    return kErrorNotSupported;
  }
  // A device that says it supports GPM but will not be sampled (MIG mode,
  // a container denied the counters).
  if (g->contains("gpm_sample_error")) {
    return (*g)["gpm_sample_error"].get<int>();
  }
  static unsigned long long serial = 0;
  auto* f = reinterpret_cast<FakeGpmSample*>(s);
  f->device = reinterpret_cast<std::uintptr_t>(d);
  f->serial = ++serial;
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmMetricsGet(GpmMetricsGet* m) {
  if (m == nullptr || m->version != kGpmMetricsGetVersion ||
      m->numMetrics > kGpmMetricMax) {
    return kErrorInvalidArgument;
  }
  const auto* a = reinterpret_cast<const FakeGpmSample*>(m->sample1);
  const auto* b = reinterpret_cast<const FakeGpmSample*>(m->sample2);
  // Two samples of one GPU, the second taken later (as NVML requires).
  if (a == nullptr || b == nullptr || a->device != b->device ||
      a->serial == 0 || b->serial <= a->serial) {
    return kErrorInvalidArgument;
  }
  const json* g = gpu(reinterpret_cast<Device>(b->device));
  if (g == nullptr || !g->contains("gpm")) {
    return kErrorNotSupported;
  }
  for (unsigned int i = 0; i < m->numMetrics; ++i) {
    const char* key = gpm_key(m->metrics[i].metricId);
    if (key != nullptr && (*g)["gpm"].contains(key)) {
      m->metrics[i].nvmlReturn = kSuccess;
      m->metrics[i].value = (*g)["gpm"][key].get<double>();
    } else {
      m->metrics[i].nvmlReturn = kErrorNotSupported;
    }
  }
  return kSuccess;
}

#endif // FAKE_NVML_OLD_DRIVER
