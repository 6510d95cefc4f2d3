#pragma once
// The training loop, as a library: bring a Model (hotloop's or your own
// torch::nn::Module deriving hotloop::model::Model) and Datasets, get mixed
// precision, gradient accumulation, evaluation, metrics, checkpoints and exact
// resume. `hotloop train` is one user of this API.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/dataset.h"
#include "hotloop/data/loader.h"
#include "hotloop/model/model.h"
#include "hotloop/train/options.h"

namespace hotloop::dist {
class ProcessGroup;
}

namespace hotloop::train {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  std::int64_t samples = 0;
  std::vector<double> per_class_accuracy;
  std::vector<std::vector<std::int64_t>> confusion; // [true][predicted]
};

struct TrainSummary {
  std::int64_t steps = 0;
  double epochs = 0; // steps / steps per epoch
  double train_loss = 0; // mean over the last 50 steps
  std::optional<EvalResult> eval; // the final evaluation
  double images_per_s = 0; // median over steady-state steps
  double step_time_ms_median = 0;
  double step_time_ms_p90 = 0;
  double data_wait_fraction = 0;
  std::uint64_t peak_allocated_bytes = 0; // CUDA
  std::uint64_t peak_reserved_bytes = 0; // CUDA
  std::uint64_t peak_rss_bytes = 0; // the process, any device
  std::int64_t skipped_steps = 0;
  std::size_t bad_samples = 0;
  std::int64_t micro_batch = 0; // as the run ended (OOM recovery shrinks it)
  std::int64_t accum_steps = 0; // as the run ended
  std::int64_t oom_recoveries = 0; // steps redone with a smaller micro-batch
  std::string device;
  std::string precision;
  // CUDA graphs: steps replayed from the captured graph, and why the run
  // was (or went) eager; empty when every step after the warm-up replayed.
  std::int64_t graph_replays = 0;
  std::string graph_off_reason;
  double wall_s = 0;
  bool stopped_early = false; // SIGINT/SIGTERM: checkpoint written, resumable
  std::string last_checkpoint;
  // Telemetry: the sampler's cost ("overhead": its CPU time / wall time),
  // the last diagnosis and how many windows got each verdict.
  nlohmann::json telemetry;
  nlohmann::json to_json() const;
};

class Trainer {
 public:
  // `val` may be null (no evaluation). Throws UsageError for options that do
  // not fit together (TrainerOptions::validate), DataError for data that does
  // not fit the model (channels, classes). With a process group (data
  // parallel), options.rank and world_size are taken from it: rank 0's
  // weights are broadcast, gradients averaged every step, and only rank 0
  // evaluates and writes the run directory.
  Trainer(
      std::shared_ptr<model::Model> model,
      std::shared_ptr<const data::Dataset> train,
      std::shared_ptr<const data::Dataset> val,
      TrainerOptions options,
      std::shared_ptr<dist::ProcessGroup> group = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs to the configured end, or until `stop` becomes true (then finishes
  // the step, writes a checkpoint and returns with stopped_early). Resumes
  // first when options.resume says so. Writes the run directory.
  TrainSummary fit(const std::atomic<bool>* stop = nullptr);

  // One evaluation pass over `val`.
  EvalResult evaluate();

  const TrainerOptions& options() const;
  const std::string& run_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::train
