#pragma once
// One optimizer step, as the loop sees it: run(state, lr) takes its batches,
// runs forward and backward (accumulating micro-batches), agrees with the
// other ranks, and applies the update at `lr`. Two implementations: EagerStep
// (eager_step.h) and GraphStep (graph_step.h: the whole step replayed as a
// CUDA graph, eager where it cannot be).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>

#include "hotloop/train/run_state.h"

namespace hotloop::train {

struct StepResult {
  // The step's mean loss and the gradients' global norm before clipping
  // (0-dim float32 on the device; the norm is zero without clipping).
  at::Tensor loss;
  at::Tensor grad_norm;
  // The loss as read before the update (eager, --readback-every 1).
  std::optional<double> loss_value;
  double lr = 0; // applied; 0 when skipped
  bool skipped = false; // loss scaling found inf/NaN gradients
  std::size_t batches_taken = 0; // micro-batches of the data consumed
  double data_wait = 0; // seconds waiting for them
  // Out of memory on this rank or (agreed) another: nothing was applied;
  // the loop shrinks the micro-batch and runs the step again.
  std::optional<std::string> out_of_memory;
  bool stop = false; // a stop was requested (on any rank)
};

// A step that must not go on: a non-finite loss read before its update, or
// the loss scale collapsed. The loop writes a checkpoint of the last good
// state and turns it into an Error.
class StepFailure : public std::runtime_error {
 public:
  StepFailure(std::string message, std::string fix, bool name_checkpoint)
      : std::runtime_error(message),
        fix_(std::move(fix)),
        name_checkpoint_(name_checkpoint) {}
  const std::string& fix() const {
    return fix_;
  }
  // The message ends with where the last good state is.
  bool name_checkpoint() const {
    return name_checkpoint_;
  }

 private:
  std::string fix_;
  bool name_checkpoint_;
};

class Step {
 public:
  virtual ~Step() = default;
  virtual StepResult run(const RunState& state, double lr) = 0;
  // The micro-batch plan changed (OOM recovery split the batch).
  virtual void plan_changed(const RunState&) {}
  // CUDA graphs: steps replayed, and why the run was (or went) eager.
  virtual std::int64_t graph_replays() const {
    return 0;
  }
  // The capture itself ran out of memory (the run went on eagerly, or
  // stopped under --cuda-graphs on).
  virtual bool graph_capture_out_of_memory() const {
    return false;
  }
  virtual std::string graph_off_reason() const = 0;
};

} // namespace hotloop::train
