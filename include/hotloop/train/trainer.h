#pragma once
// The training loop, as a library: bring a Model (hotloop's or your own
// torch::nn::Module deriving hotloop::model::Model) and Datasets, get mixed
// precision, gradient accumulation, evaluation, checkpoints and exact resume;
// observe the run with callbacks (callback.h; standard_callbacks.h has the
// ones `hotloop train` uses). `hotloop train` is one user of this API.

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/model/model.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/standard_callbacks.h"
#include "hotloop/train/options.h"
#include "hotloop/train/summary.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::train {

// What a run works with besides its options and data.
// What config.json records beyond the trainer's own options, as the caller
// resolved them (`hotloop train`: train/run_options.h).
struct RunRecord {
  // The caller's options by name (the data, callbacks' settings, ...),
  // written beside the trainer's in config.json's "options".
  nlohmann::json options = nlohmann::json::object();
  // Where each option's value came from (name -> "default" | "recipe" |
  // "config file" | "flag"); empty: not known (a program's own options).
  std::map<std::string, std::string> sources;
};

struct TrainerContext {
  TrainerContext(
      Callbacks callbacks_ = standard_callbacks(),
      std::shared_ptr<parallel::ProcessGroup> group_ = nullptr,
      RunRecord record_ = {})
      : callbacks(std::move(callbacks_)),
        group(std::move(group_)),
        record(std::move(record_)) {}

  // Told every event, in this order (a callback that reads another's
  // figures comes after it).
  Callbacks callbacks;
  // Data parallel (parallel/process_group.h); null: one process. The
  // options' rank and world size are taken from it: rank 0's weights are
  // broadcast, gradients averaged every step, and only rank 0 evaluates and
  // writes the run directory.
  std::shared_ptr<parallel::ProcessGroup> group;
  RunRecord record;
};

class Trainer {
 public:
  // `val` may be null (no evaluation). Sets the run up: the device, the
  // model on it (initial weights, frozen parts, channels-last), the
  // optimizer, the loader. Throws UsageError for options that do not fit
  // together (TrainerOptions::validate), DataError for data that does not
  // fit the model (channels, classes).
  Trainer(
      std::shared_ptr<model::Model> model,
      std::shared_ptr<const data::Dataset> train,
      std::shared_ptr<const data::Dataset> val,
      TrainerOptions options,
      TrainerContext context = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs to the configured end, or until `stop` becomes true (then finishes
  // the step, writes a checkpoint and returns with stopped_early). Resumes
  // first when options.resume says so. Writes the run directory.
  TrainSummary fit(const std::atomic<bool>* stop = nullptr);

  // One evaluation pass over `val` (empty without it). Throws UsageError
  // after a ZeRO stage-3 fit whose model stayed sharded (it did not fit one
  // device whole).
  EvalResult evaluate();

  const TrainerOptions& options() const;
  const std::string& run_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::train
