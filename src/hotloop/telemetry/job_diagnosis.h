#pragma once
// Why a job hotloop did not start is slow (`hotloop watch`), from what can be
// seen from outside it: the GPU's signals and the job's own share of them,
// the CPU use of each process of its tree, the machine's CPU and I/O wait.
// A pure function of one window, like diagnose() for training runs, with
// which it shares the GPU's own findings (throttling, other processes).

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "hotloop/telemetry/diagnosis.h"

namespace hotloop::telemetry {

// A process of the job other than the main one (a DataLoader worker, a rank).
struct HelperProcess {
  int pid = 0;
  std::string name;
  double cpu_mean = 0; // percent of one core
  // Its main thread runnable (on a core or waiting for one), percent of the
  // time; NaN: unknown.
  double runnable_mean = std::numeric_limits<double>::quiet_NaN();
};

struct JobWindowInput {
  double from_s = 0; // seconds since watch started
  double to_s = 0;
  std::size_t samples = 0;
  // What NVML sees.
  bool nvml = false;
  std::string nvml_error;
  int gpus_on_machine = 0;
  bool cuda_hidden = false; // the job's CUDA_VISIBLE_DEVICES names no GPU
  bool holds_gpu = false; // the job held GPU memory in this window
  // The job's GPU (the one its processes used most): whole-GPU means, and
  // other_processes are those outside the job's tree.
  std::optional<GpuWindow> gpu;
  unsigned int gpu_index = 0;
  std::optional<double> job_sm_mean; // the job's own SM share (percent)
  std::optional<double> others_sm_mean;
  std::uint64_t job_memory = 0; // last seen
  // The job's GPU memory at the end of each window so far (this one last).
  std::vector<std::uint64_t> memory_history;
  std::optional<unsigned int> pcie_gen, pcie_max_gen, pcie_width,
      pcie_max_width;
  // The host.
  int main_pid = 0;
  std::string main_name;
  double main_cpu_mean = 0; // percent of one core
  double main_runnable_mean = std::numeric_limits<double>::quiet_NaN();
  std::vector<HelperProcess> helpers;
  double host_cpu_mean = 0; // percent of all cores
  double host_iowait_mean = 0;
  int host_cores = 1;
  double read_bytes_per_s = 0; // the tree's disk reads
  // Steps the job reported (0: none).
  std::size_t steps = 0;
  double steps_per_s = 0;
};

struct JobDiagnosisOptions {
  double gpu_busy = 80; // the job's SM share (%) at or above: busy
  // A process at this % of one core (or runnable this % of the time) is
  // saturated: a Python DataLoader worker that never waits for work still
  // spends a tenth or more in its queues' system calls.
  double core_saturated = 80;
  double iowait = 10; // machine I/O wait (%) that counts as waiting on disk
  double memory_full = 0.95; // share of the GPU's memory
  std::size_t leak_windows = 3;
  double leak_growth = 0.01;
  DiagnosisOptions gpu; // throttling thresholds, shared with training runs
};

// Verdicts: cpu-only, input-bound, host-bound, memory-near-full,
// memory-growing, throttled-thermal, throttled-power, throttled,
// other-process, pcie-narrowed, under-used, healthy (most important first).
Diagnosis diagnose_job(
    const JobWindowInput& w,
    const JobDiagnosisOptions& o = {});

} // namespace hotloop::telemetry
