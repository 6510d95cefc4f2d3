#pragma once
// Telemetry for one training run, as the trainer sees it: step phases (CPU
// clocks; CUDA events read a step late on the GPU), the background sampler,
// a diagnosis every window of steps, TensorBoard scalars, telemetry.jsonl and
// the Prometheus endpoint. Off (`enabled = false`), every call returns at
// once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "hotloop/telemetry/diagnosis.h"

namespace hotloop::cuda {
class GpuTimer;
}

namespace hotloop::telemetry {

class Sampler;
class TensorBoardWriter;
class MetricsServer;

enum class Phase : std::size_t {
  DataWait,
  Copy,
  Forward,
  Backward,
  Optimizer,
  AllReduce, // data parallel: gradients averaged across ranks
  Graph, // CUDA graphs: forward + backward + optimizer as one replay
  Count
};

struct RunTelemetryOptions {
  bool enabled = true;
  double interval_s = 1.0; // sampler period
  std::int64_t window_steps = 50; // steps per diagnosis
  bool tensorboard = true;
  int metrics_port = 0; // 0: no endpoint
  std::string nvml_library; // "": the default
  DiagnosisOptions diagnosis;
  // Data parallel: this rank, the number of ranks, and an element-wise sum
  // over ranks (one small all-reduce per window), for per-rank phases.
  int rank = 0;
  int world_size = 1;
  std::function<std::vector<double>(std::vector<double>)> sum_over_ranks;
};

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0; // NaN: not read back yet (record_loss brings it later)
  double lr = 0;
  double step_time_s = 0;
  double images_per_s = 0;
};

// What the trainer writes or logs after a step.
struct StepOutput {
  nlohmann::json phases_ms; // this step's (CPU) or the previous step's (GPU)
  std::optional<nlohmann::json> window; // a metrics.jsonl line, at window end
  std::string log; // a verdict that changed, for the log
};

class RunTelemetry {
 public:
  // `run_dir` "" : nothing is written (batch-size trials).
  RunTelemetry(
      RunTelemetryOptions options,
      c10::Device device,
      const std::string& run_dir);
  ~RunTelemetry();
  RunTelemetry(const RunTelemetry&) = delete;
  RunTelemetry& operator=(const RunTelemetry&) = delete;

  void begin_step();
  // Closes the interval since the previous mark as phase `p`.
  void end_phase(Phase p);
  StepOutput end_step(const StepRecord& r);
  // A step's loss read back after its end_step (the trainer reads losses
  // every N steps on CUDA): TensorBoard's train/loss and the metrics gauge.
  void record_loss(std::int64_t step, double loss);
  // The last partial window's diagnosis, the overhead and the verdicts seen;
  // for summary.json.
  nlohmann::json finish(double run_wall_s);

  bool enabled() const {
    return options_.enabled;
  }

 private:
  std::optional<Diagnosis> close_window(std::int64_t last_step);

  RunTelemetryOptions options_;
  c10::Device device_;
  bool usable_gpu_ = false;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<cuda::GpuTimer> gpu_timer_;

  // The step being timed.
  std::chrono::steady_clock::time_point mark_;
  double cpu_phase_[static_cast<std::size_t>(Phase::Count)] = {};
  // The window being filled.
  std::int64_t window_first_ = 0;
  std::int64_t window_steps_ = 0;
  double window_wall_ = 0;
  PhaseTotals window_phases_;
  std::vector<std::uint64_t> allocated_history_;
  std::size_t samples_seen_ = 0; // by the TensorBoard scalars
  std::size_t samples_published_ = 0; // by the Prometheus endpoint
  // Across the run.
  std::optional<Diagnosis> last_;
  std::vector<RankWindow> last_ranks_;
  std::map<std::string, int> verdict_windows_;
  StepRecord last_record_;
  double last_loss_ = 0; // the latest loss read back
};

} // namespace hotloop::telemetry
