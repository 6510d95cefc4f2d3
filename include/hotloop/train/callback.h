#pragma once
// Callbacks observe a training run at the loop's events and never change it
// (Composer's rule): telemetry, the metrics file, the console's progress,
// TensorBoard, Prometheus, a data-parallel rank's status and bench's time
// budget are callbacks, and so can be a user's own (examples/custom_model logs
// the gradient norm every N steps). A callback gets the run's state const; the
// one thing it may do to the run is what a user can, ask it to stop (through
// the flag the caller passed to Trainer::fit).
//
// The events of one run, in order:
//   on_fit_start
//   per step:  on_step_begin, on_phase (data, forward, backward, ...),
//              on_gradients (eager steps that apply their update),
//              on_step_end, on_loss (now, or when the loss is read back)
//   when due:  on_evaluation, on_checkpoint
//   rarely:    on_oom_recovery, on_message (the trainer's log lines)
//   on_fit_end
// A step's on_loss comes at its on_step_end on the CPU and up to
// --readback-every steps later on a GPU, always in step order.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/core/phase.h"
#include "hotloop/train/run_state.h"
#include "hotloop/train/summary.h"

namespace hotloop::train {

// One optimizer step's figures as it ends (state.step is its number).
struct StepEnd {
  double lr = 0; // the learning rate applied; 0 when the step was skipped
  double seconds = 0; // the step's wall time on the host
  double data_wait_seconds = 0; // of it, waiting for batches
  std::int64_t samples = 0; // the global batch
  bool skipped = false; // loss scaling found inf/NaN gradients
  double loss_scale = 0; // 0: no loss scaling
  // An on_loss for this step follows (always, from the trainer; a loop
  // driven from Python says so per step).
  bool loss_follows = true;
};

// A step's loss as read back from the device.
struct StepLoss {
  std::int64_t step = 0;
  double loss = 0;
  std::optional<double> grad_norm; // before clipping; with --clip-grad-norm
};

// A step that ran out of memory and is redone with a smaller micro-batch.
struct OomRecoveryEvent {
  std::int64_t step = 0; // the step being redone (1-based)
  std::int64_t micro_batch = 0; // from now on
  std::int64_t accum_steps = 0; // from now on
  std::string error;
  std::string report_path; // "": none written
};

class Callback {
 public:
  virtual ~Callback() = default;
  // A short name ("metrics", "telemetry"); config.json lists the callbacks
  // by it, with config().
  virtual std::string name() const = 0;
  virtual nlohmann::json config() const {
    return nlohmann::json::object();
  }

  virtual void on_fit_start(const RunState&) {}
  virtual void on_step_begin(const RunState&) {}
  // `phase` begins (the previous one ended).
  virtual void on_phase(const RunState&, Phase) {}
  // The step's gradients are final (averaged across ranks, unscaled) and the
  // update is next; not for steps skipped by loss scaling or replayed from a
  // CUDA graph.
  virtual void on_gradients(const RunState&) {}
  virtual void on_step_end(const RunState&, const StepEnd&) {}
  virtual void on_loss(const RunState&, const StepLoss&) {}
  virtual void on_evaluation(const RunState&, const EvalResult&) {}
  virtual void on_checkpoint(const RunState&, const std::string& path) {}
  virtual void on_oom_recovery(const RunState&, const OomRecoveryEvent&) {}
  virtual void on_message(const RunState&, const std::string&) {}
  // The run's end (finished, or stopped early). What it returns goes into
  // summary.json under its name (null: nothing).
  virtual nlohmann::json on_fit_end(const RunState&, const TrainSummary&) {
    return nullptr;
  }
};

using Callbacks = std::vector<std::shared_ptr<Callback>>;

} // namespace hotloop::train
