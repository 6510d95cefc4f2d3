#pragma once
// Why a run is slow, from one window of steps: the step phases, the GPU's
// signals over the same time, and the memory trend. A pure function, so that
// every verdict can be tested without hardware.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/telemetry/sampler.h"

namespace hotloop::telemetry {

// Seconds per phase, summed over the window's steps.
struct PhaseTotals {
  double data_wait = 0; // the host waiting for the loader
  double copy = 0; // host-to-device copy the compute stream waited for
  double forward = 0;
  double backward = 0;
  double optimizer = 0;
  double allreduce = 0; // DDP
  double graph = 0; // CUDA graph replay: forward + backward + optimizer
};

// One rank's window (data parallel): its busy time per phase; ranks wait for
// the slowest at every all-reduce, so the slowest is the straggler.
struct RankWindow {
  int rank = 0;
  double data_wait = 0;
  double compute = 0; // copy + forward + backward + optimizer
};

struct WindowInput {
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  double wall_s = 0; // the window's steps, end to end
  PhaseTotals phases;
  bool on_cuda = false;
  bool usable_gpu_present = false; // CUDA can use a GPU this run is not on
  std::optional<GpuWindow> gpu; // the training GPU's signals
  // Memory in use at the end of each window so far (this one last): on CUDA
  // the allocator's allocated bytes, which its cache (reserved but free)
  // cannot inflate, so a large cache is never taken for a leak.
  std::vector<std::uint64_t> memory_history;
  std::string memory_source = "allocated memory";
  std::vector<RankWindow> ranks; // data parallel: every rank's window
  // Learning: the mean of the losses read back during this window and
  // during the run's first one (NaN: none), the loss of a uniform guess
  // (ln of the class count; 0: unknown), and whether the schedule's warm-up
  // had ended when this window began.
  double loss_mean = std::numeric_limits<double>::quiet_NaN();
  double first_loss_mean = std::numeric_limits<double>::quiet_NaN();
  double chance_loss = 0;
  bool past_warmup = false;
  std::string precision = "fp32"; // the math's: fp32, tf32, bf16, fp16
};

struct DiagnosisOptions {
  double input_bound = 0.10; // data wait above this share of the step time
  double transfer_bound = 0.10; // exposed copy above this share
  double busy = 90; // GPU utilization (%): healthy at or above, under-used
                    // below (with little data or copy wait)
  double clock_ratio = 0.90; // clocks below this share of max while slowed
  std::size_t leak_windows = 3; // windows of steady growth that make a leak
  double leak_growth = 0.01; // each at least this much larger (relative)
  double straggler = 1.2; // a rank busy this many times the others' median
  // Past the warm-up, a mean loss at or above this share of a uniform
  // guess's is not learning (as is one above the first window's).
  double chance_share = 0.95;
  // GPM counters (Hopper and later): SM activity (%) at or above which the
  // SMs count as busy; tensor pipes (%) below which they count as idle; DRAM
  // bandwidth (%) at or above which the step is memory-bound; and the ratio
  // of SM activity to NVML's "GPU utilization" below which the GPU is busy
  // in name only (launch-bound).
  double sm_busy = 60;
  double tensor_idle = 5;
  double dram_bound = 80;
  double launch_ratio = 0.5;
};

struct Finding {
  // not-learning, cpu-with-gpu, memory-leak, input-bound, transfer-bound,
  // straggler, throttled-thermal, throttled-power, throttled, other-process,
  // under-used, launch-bound, memory-bound, tensor-idle, healthy
  std::string verdict;
  std::string evidence;
  std::string fix;
};

struct Diagnosis {
  std::vector<Finding> findings; // most important first; never empty
  const Finding& primary() const {
    return findings.front();
  }
};

Diagnosis diagnose(const WindowInput& w, const DiagnosisOptions& o = {});

// The findings a GPU's own signals give, for a training run and a watched
// job alike (`where` opens the evidence: "steps 1-50", "GPU 0, 10-20 s").
// Clocks held down while busy: throttled-thermal/-power/-throttled.
std::optional<Finding> throttle_finding(
    const GpuWindow& g,
    const std::string& where,
    const DiagnosisOptions& o);
// Memory that grew in each of the last `windows` windows by more than
// `growth` (relative): a leak, whatever the absolute size.
bool grows_steadily(
    const std::vector<std::uint64_t>& history,
    std::size_t windows,
    double growth);
// Other processes on the GPU (`share`, when known, their SM share).
std::optional<Finding> other_process_finding(
    const std::vector<env::GpuProcess>& others,
    const std::string& where,
    const std::string& share = "");

nlohmann::json to_json(const Diagnosis& d);

} // namespace hotloop::telemetry
