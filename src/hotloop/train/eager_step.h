#pragma once
// The eager training step: accum_steps x (next batch -> autocast forward ->
// loss -> (scaled) backward), then the ranks' agreement (data parallel), the
// loss read before the update where the readback says so, unscale and skip
// (loss scaling), clipping and the optimizer's update at the schedule's LR.
// An out-of-memory error anywhere in forward/backward comes back in the
// result (nothing applied), for the loop's recovery.
//
// The loss is per trained target: the sum of the token (or sample) losses
// over every micro-batch and rank, divided by the targets the whole step
// trained (counted on the host as the loader made each batch: no sync), so
// that micro-batches and ranks whose examples train different numbers of
// tokens give the gradient of the one large batch (transformers #34191).

#include <cstdint>
#include <functional>
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
  // The ZeRO stage the run trains at (--shard; a stage-3 run whose model
  // has no units trains at 2), 0 unsharded.
  int shard = 0;
  const FaultInjection* faults = nullptr;
  // Trainable, by name, in registration order; with --shard, this rank's
  // shards (what the optimizer updates).
  NamedParams params;
  std::vector<at::Tensor> tensors; // the same parameters (the scaler's list)
  // --shard: sums a clipping norm's square over the ranks (in place).
  std::function<void(at::Tensor&)> sum_over_ranks;
  at::Tensor zero_norm; // the gradient norm when clipping is off
};

// A step's trained targets: this rank's, all ranks' (after the agreement),
// and the divisor each micro-batch's summed loss was taken over.
struct TargetCount {
  std::int64_t local = 0;
  std::int64_t global = 0;
  int ranks = 1;
  double divisor = 1;
};

class EagerStep final : public Step {
 public:
  // `off_reason`: why the run is not graphed (for the summary).
  EagerStep(StepParts parts, std::string off_reason);

  StepResult run(const RunState& s, double lr) override;
  // After the gradients are final: clip, step, gather (--shard).
  void update(const RunState& s, double lr, StepResult& r);
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
  // What each micro-batch's summed loss is divided by before backward.
  double step_divisor(const RunState& s, const data::Batch& first) const;
  // The gradients rescaled to the step's trained targets on all ranks, and
  // the loss to this rank's.
  void per_trained_token(const TargetCount& t, StepResult& r) const;

  StepParts parts_;
  std::string off_reason_;
  bool checked_ = false;
};

} // namespace hotloop::train
