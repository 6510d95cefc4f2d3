#pragma once
// Where a step's loss and gradient norm come back to the host. Two halves:
// StepReadback, the mechanism (per-step values the device computes, copied
// back every N steps without a synchronization: each step's values go into a
// device buffer; when N steps are in it, one copy to pinned memory is queued
// behind them, and poll() hands out the rows whose copy has landed; with N = 1
// on the CPU an ordinary read), and Readback, the policy (the one place that
// decides "now or later": with --readback-every 1 the eager step reads its
// loss before the update, so a non-finite loss is never applied; otherwise
// the values come back every N steps). Either way callbacks hear each loss
// (Callback::on_loss) in step order, and a non-finite one found here stops
// the run, unless the precision mode owns it (loss scaling skips overflows).

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/cuda/host_copy.h"
#include "hotloop/train/events.h"

namespace hotloop::train {

class StepReadback {
 public:
  // `columns`: values per step. `every`: steps per copy (at least 1).
  StepReadback(std::int64_t every, std::size_t columns);

  struct Row {
    std::int64_t step = 0;
    std::vector<double> values;
  };

  // Keeps step `step`'s values (0-dim tensors, all on one device); with
  // `every` steps kept, queues their copy to the host.
  void record(std::int64_t step, const std::vector<at::Tensor>& values);
  // The rows whose copy has landed, oldest first; never waits.
  std::vector<Row> poll();
  // Queues what is kept and waits for every copy: before an evaluation, a
  // checkpoint and at the end.
  std::vector<Row> drain();

  std::int64_t every() const {
    return every_;
  }

 private:
  struct InFlight {
    std::vector<std::int64_t> steps;
    cuda::HostCopy copy;
  };
  void flush();
  static void take(InFlight& f, std::vector<Row>& out);

  std::int64_t every_;
  std::size_t columns_;
  at::Tensor buffer_; // [every, columns] float, on the values' device
  std::vector<std::int64_t> kept_; // steps of buffer_'s filled rows
  std::deque<InFlight> in_flight_;
};

class Readback {
 public:
  // `every`: steps per copy (at least 1). `grad_norms`: the runs clips, so
  // each step has a norm to report. `skips_overflow`: the precision
  // mode skips overflowing steps itself (loss scaling).
  Readback(std::int64_t every, bool grad_norms, bool skips_overflow);

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
  bool skips_overflow_;
  std::unique_ptr<StepReadback> device_values_;
  std::deque<double> recent_;
};

} // namespace hotloop::train
