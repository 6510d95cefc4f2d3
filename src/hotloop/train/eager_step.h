#pragma once
// The eager training step: accum_steps x (next batch -> autocast forward ->
// loss -> (scaled) backward), then the ranks' agreement (data parallel), the
// loss read before the update where the readback says so, unscale and skip
// (loss scaling), clipping and the optimizer's update at the schedule's LR.
// An out-of-memory error anywhere in forward/backward comes back in the
// result (nothing applied), for the loop's recovery.

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/train/events.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/gradients.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/readback.h"
#include "hotloop/train/step.h"
#include "hotloop/train/step_sync.h"

namespace hotloop::train {

// What a step works with besides the run's state; owned by the trainer.
struct StepParts {
  PrecisionMode* precision = nullptr;
  Readback* readback = nullptr;
  Events* events = nullptr;
  StepSync* sync = nullptr; // null: one process
  const FaultInjection* faults = nullptr;
  NamedParams params; // trainable, by name, in registration order
  std::vector<at::Tensor> tensors; // the same parameters (the scaler's list)
  at::Tensor zero_norm; // the gradient norm when clipping is off
};

class EagerStep final : public Step {
 public:
  // `off_reason`: why the run is not graphed (for the summary).
  EagerStep(StepParts parts, std::string off_reason);

  StepResult run(const RunState& s, double lr) override;
  std::string graph_off_reason() const override {
    return off_reason_;
  }

  // The next training batch (micro-batch `taken` of this step), with the
  // data phase and its wait; an Error when the epoch ends early.
  data::Batch take_batch(const RunState& s, std::size_t taken, StepResult& r);
  // The device check, at this process's first step (before the gradients
  // are dropped).
  void check_devices_once(const RunState& s, const data::Batch& batch);
  const StepParts& parts() const {
    return parts_;
  }

 private:
  StepParts parts_;
  std::string off_reason_;
  bool checked_ = false;
};

} // namespace hotloop::train
