#pragma once
// `hotloop doctor`: verdicts on the driver, CUDA, the framework, each GPU and
// the host, each with the measured facts and, when something is wrong, one line
// saying how to fix it.
//
// Two steps, so that every verdict can be tested without a GPU: collect() reads
// the machine (NVML, LibTorch, /proc, /sys), evaluate() is a pure function of
// those facts.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/env/gpu_probe.h"
#include "hotloop/env/host_probe.h"
#include "hotloop/env/nvml_library.h"
#include "hotloop/env/torch_probe.h"

namespace hotloop::env {

enum class Status { Pass, Warn, Fail, Skip };

// The machine as a whole. CpuOnly: no NVIDIA GPU that could be used; training
// runs on the CPU and that is not a failure (exit code 0).
enum class Verdict { Pass, Warn, Fail, CpuOnly };

struct Check {
  std::string id; // stable, e.g. "cuda.driver_compat", "gpu0.throttle"
  Status status = Status::Pass;
  std::string summary; // one line: what was measured and what it means
  nlohmann::json facts =
      nlohmann::json::object(); // the measurements; a fact NVML could not read
                                // is {"skipped": why}
  std::string fix; // for WARN and FAIL: one line saying what to do
};

struct Report {
  Verdict verdict = Verdict::Pass;
  std::vector<Check> checks;
};

struct DoctorThresholds {
  unsigned int temperature_margin_c =
      5; // WARN this close to the slowdown temperature
  double min_free_gpu_memory_fraction =
      0.10; // FAIL when other processes leave less than this free
  std::uint64_t min_shm_bytes = 1ULL
      << 30; // WARN below (NCCL and shared-memory loaders use /dev/shm)
  std::uint64_t min_memlock_bytes = 1ULL
      << 30; // WARN below, with a GPU (pinned and registered memory)
  std::uint64_t warn_disk_free_bytes = 10ULL
      << 30; // WARN below, where runs are written
  std::uint64_t fail_disk_free_bytes = 1ULL << 30; // FAIL below
  std::uint64_t min_available_host_memory_bytes = 2ULL << 30; // WARN below
  unsigned int busy_utilization_percent =
      10; // above this the GPU counts as under load (PCIe check)
};

struct DoctorOptions {
  std::string nvml_library = nvml::default_library_path();
  HostProbeOptions host;
  TorchProbeOptions torch;
  DoctorThresholds thresholds;
  unsigned int self_pid =
      0; // processes with this pid are not "another process"; 0: getpid()
};

struct DoctorFacts {
  HostFacts host;
  NvmlFacts nvml;
  TorchFacts torch;
  unsigned int self_pid = 0;
  // NVML's pids are this process's (false inside a container with a PID
  // namespace of its own: own_process.h).
  bool host_pids = true;
};

// Reads the machine. Never throws for a missing driver, library or fact.
DoctorFacts collect(const DoctorOptions& options);

// The verdicts, in a fixed order: framework, driver and CUDA, each GPU, host.
Report evaluate(const DoctorFacts& facts, const DoctorThresholds& thresholds);

// collect() then evaluate(): what `hotloop doctor` and `hotloop run` call.
Report diagnose(const DoctorOptions& options);

// 0 unless the verdict is Fail (1).
int exit_code(const Report& report);

const char* to_string(Status s); // "PASS", "WARN", "FAIL", "SKIP"
const char* to_string(Verdict v); // "pass", "warn", "fail", "cpu-only"

// {"verdict": ..., "checks": [{"id", "status", "summary", "facts", "fix"}...]}
nlohmann::json to_json(const Report& report);

// The human form: one line per check, a fix line under each WARN/FAIL, and the
// verdict.
std::string to_text(const Report& report, bool color);

} // namespace hotloop::env
