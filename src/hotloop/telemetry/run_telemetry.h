#pragma once
// Telemetry for one training run: step phases (CPU clocks; on a GPU, CUDA
// events read once each step's have completed), the background sampler
// (telemetry.jsonl), and a diagnosis every window of steps. The trainer's
// TelemetryCallback drives it; the callbacks that export its figures
// (TensorBoard, Prometheus, the metrics file) read them from there.

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/phase.h"
#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/telemetry/samples.h"

namespace hotloop::cuda {
class GpuTimer;
struct TimedStep;
} // namespace hotloop::cuda

namespace hotloop::telemetry {

class Sampler;

struct RunTelemetryOptions {
  double interval_s = 1.0; // sampler period
  std::int64_t window_steps = 50; // steps per diagnosis
  std::string nvml_library; // "": the default
  // For the not-learning verdict: a uniform guess's loss (0: unknown) and
  // the step the schedule's warm-up ends at.
  double chance_loss = 0;
  std::int64_t warmup_end = 0;
  // The math's precision (fp32, tf32, bf16, fp16), for tensor-idle.
  std::string precision = "fp32";
  DiagnosisOptions diagnosis;
  // Data parallel: this rank, the number of ranks, and an element-wise sum
  // over ranks (one small all-reduce per window), for per-rank phases.
  int rank = 0;
  int world_size = 1;
  std::function<std::vector<double>(std::vector<double>)> sum_over_ranks;
  // The clock the host's phases are timed with; empty: steady_clock. Tests
  // give one they advance by hand, so that a verdict needs no sleeps.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0; // for the exporters (Prometheus); telemetry takes its
                   // losses from record_loss(), when they are read back
  double lr = 0;
  double step_time_s = 0;
  double images_per_s = 0;
  double tokens_per_s = 0; // language models; 0 otherwise
};

// What a step left: its phases, and at a window's end the metrics line and
// a verdict that changed.
struct StepOutput {
  // A step's phases: this step's on the CPU; on a GPU, those of the newest
  // step whose events have completed (phases_step says which; null when
  // none completed since the last step).
  nlohmann::json phases_ms;
  std::int64_t phases_step = 0;
  std::optional<nlohmann::json> window; // a metrics.jsonl line, at window end
  std::string log; // a verdict that changed, for the log
};

class RunTelemetry {
 public:
  // Samples and windows go to `jsonl_path` (the run folder's
  // telemetry.jsonl, train/run_folder.h); "": no file.
  RunTelemetry(
      RunTelemetryOptions options,
      c10::Device device,
      const std::string& jsonl_path);
  ~RunTelemetry();
  RunTelemetry(const RunTelemetry&) = delete;
  RunTelemetry& operator=(const RunTelemetry&) = delete;

  void begin_step();
  // Phase `p` begins: the interval since the previous one counts as that
  // one's. Phases outside a step (evaluation, checkpoint) are not timed.
  void enter_phase(Phase p);
  // Adds `seconds` to phase `p` of the step being timed: a phase its caller
  // timed itself (hotloop.Run: the loader's wait, before the step began).
  void add_phase_seconds(Phase p, double seconds);
  StepOutput end_step(const StepRecord& r);
  // A step's loss, read back at or after its end_step (every N steps on
  // CUDA): the diagnosis's learning check averages them per window.
  void record_loss(std::int64_t step, double loss);
  // The last partial window's diagnosis, the overhead and the verdicts seen;
  // for summary.json.
  nlohmann::json finish(double run_wall_s);

  // For the exporters: the newest sample, how many were taken, and the
  // latest window's diagnosis.
  std::optional<Sample> latest_sample() const;
  std::size_t samples_taken() const;
  const std::optional<Diagnosis>& last_diagnosis() const {
    return last_;
  }

  // The names of the timed phases, as in metrics.jsonl's phases_ms.
  static constexpr std::size_t kSlots = 7;

 private:
  std::optional<Diagnosis> close_window(std::int64_t last_step);
  // On a GPU: completed steps' phases into the window.
  void add_gpu_phases(const std::vector<cuda::TimedStep>& done);
  void close_phase();
  std::chrono::steady_clock::time_point now() const;

  RunTelemetryOptions options_;
  c10::Device device_;
  bool usable_gpu_ = false;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<cuda::GpuTimer> gpu_timer_;
  std::int64_t gpu_steps_timed_ = 0;

  // The step being timed.
  bool in_step_ = false;
  std::optional<Phase> current_;
  std::chrono::steady_clock::time_point mark_;
  double cpu_phase_[kSlots] = {};
  // The window being filled.
  std::int64_t window_first_ = 0;
  std::int64_t window_steps_ = 0;
  double window_wall_ = 0;
  PhaseTotals window_phases_;
  std::vector<std::uint64_t> allocated_history_;
  // Across the run.
  std::optional<Diagnosis> last_;
  std::vector<RankWindow> last_ranks_;
  std::map<std::string, int> verdict_windows_;
  std::int64_t last_step_ = 0;
  double window_loss_sum_ = 0; // losses read back in this window
  std::int64_t window_losses_ = 0;
  double first_loss_mean_ = std::numeric_limits<double>::quiet_NaN();
};

} // namespace hotloop::telemetry
