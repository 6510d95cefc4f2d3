#pragma once
// Where a step's loss and gradient norm come back to the host, and the one
// place that decides "now or later": with --readback-every 1 the eager step
// reads its loss before the update (a non-finite loss is never applied);
// otherwise the values stay on the device and come back every N steps
// without a synchronization (step_readback.h). Either way callbacks hear
// each loss (Callback::on_loss) in step order, and a non-finite one found
// here stops the run, unless loss scaling owns it (an overflow it skips).

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/train/events.h"
#include "hotloop/train/step_readback.h"

namespace hotloop::train {

class Readback {
 public:
  // `every`: steps per copy (at least 1). `grad_norms`: the runs clips, so
  // each step has a norm to report. `scaled`: loss scaling is on.
  Readback(std::int64_t every, bool grad_norms, bool scaled);

  std::int64_t every() const {
    return every_;
  }
  // The eager step reads its loss before its update.
  bool before_update() const {
    return every_ == 1;
  }
  // Step state.step ended: `value` when its loss was read already, else its
  // `loss` and `grad_norm` tensors are kept for the next copy. Tells the
  // callbacks every loss read back by now; throws Error at a non-finite one.
  void record(
      const RunState& s,
      std::optional<double> value,
      const at::Tensor& loss,
      const at::Tensor& grad_norm,
      Events& events);
  // Reads back everything kept, waiting for it: before an evaluation, a
  // checkpoint, and at the end.
  void drain(const RunState& s, Events& events);

  // The mean of the last 50 losses read back (the summary's train_loss).
  double train_loss() const;
  const std::deque<double>& recent_losses() const {
    return recent_;
  }
  // A resumed run continues the losses of the part before it.
  void set_recent_losses(const std::vector<double>& losses);

 private:
  void take(
      const std::vector<StepReadback::Row>& rows,
      const RunState& s,
      Events& events);
  void deliver(const RunState& s, const StepLoss& l, Events& events);

  std::int64_t every_;
  bool grad_norms_;
  bool scaled_;
  std::unique_ptr<StepReadback> device_values_;
  std::deque<double> recent_;
};

} // namespace hotloop::train
