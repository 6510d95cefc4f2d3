#pragma once
// Per-step values the device computes (the loss, the gradient norm), read
// back to the host every N steps without a synchronization. Each step's
// values are written into a device buffer; when N steps are in it, one copy
// to pinned memory is queued behind them, and poll() hands out the rows whose
// copy has landed. With N = 1 on the CPU this is an ordinary read.

#include <cstdint>
#include <deque>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/cuda/host_copy.h"

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

} // namespace hotloop::train
