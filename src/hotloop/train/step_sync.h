#pragma once
// A data-parallel rank's part in each step (parallel/gradient_sync.h's
// protocol): the gradient buckets armed for the last micro-batch's backward,
// every bucket started whatever happened, one all-reduce in which the ranks
// agree on an out-of-memory and a stop request and add up the targets they
// trained, then the mean gradients (or, after an OOM anywhere, nothing: the
// step is redone on every rank), and after the update what the sharded
// reducer does then (the parameters gathered).

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/parallel/gradient_sync.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::train {

class StepSync {
 public:
  StepSync(
      std::shared_ptr<parallel::ProcessGroup> group,
      std::unique_ptr<parallel::GradientSync> reducer);

  // Before a step of `micro_batches` micro-batches.
  void begin_step(std::size_t micro_batches) {
    reducer_->begin_step(micro_batches);
  }
  // Before the backward whose gradients are final.
  void arm() {
    reducer_->arm();
  }
  struct Agreement {
    bool out_of_memory = false; // on some rank
    bool stop = false; // requested on some rank
    std::int64_t targets = 0; // trained in the step, on all ranks
  };
  // After backward (or an OOM in it): starts the remaining buckets and
  // agrees with the other ranks; `targets`: this rank's trained targets.
  Agreement agree(bool out_of_memory, bool stop, std::int64_t targets);
  int world_size() const;
  // The mean gradients, written back.
  void finish() {
    reducer_->finish();
  }
  // An OOM somewhere: the buckets' results are dropped.
  void discard() {
    reducer_->discard();
  }
  // The optimizer has updated (or skipped) the step.
  void after_update() {
    reducer_->after_update();
  }
  const std::shared_ptr<parallel::ProcessGroup>& group() const {
    return group_;
  }

 private:
  std::shared_ptr<parallel::ProcessGroup> group_;
  std::unique_ptr<parallel::GradientSync> reducer_;
};

} // namespace hotloop::train
