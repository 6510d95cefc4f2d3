#pragma once
// Averages gradients over the ranks of a data-parallel job, overlapping the
// communication with backward the way PyTorch's DDP reducer does: the
// parameters are split into buckets of about `bucket_bytes` in reverse
// registration order (roughly the order backward produces their gradients);
// a hook after each parameter's gradient accumulation counts it in, and a
// bucket whose gradients are all ready is copied into its flat buffer and
// its all-reduce started at once, while backward goes on with the earlier
// layers. Buckets start in bucket order on every rank, so the collectives
// match across ranks.
//
// The step protocol (every rank, every step, whatever happened):
//   arm()          before the backward whose gradients are final (the last
//                  micro-batch): hooks start buckets from now on;
//   launch_rest()  after backward, or after an OOM in it: starts the buckets
//                  not started yet (all of them when nothing was armed), so
//                  every rank has started the same collectives;
//   finish()       waits and writes the means back into the gradients; or
//   discard()      waits and throws the results away (an OOM on some rank:
//                  the step is redone).
// A rank that ran out of memory mid-backward still starts every bucket,
// with whatever its buffers hold; the step-agreement all-reduce that follows
// launch_rest() tells every rank to discard.

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace hotloop::parallel {

class ProcessGroup;

struct ReducerOptions {
  std::size_t bucket_bytes = 25u << 20;
  // false: no hooks; every bucket starts in launch_rest() (after backward).
  bool overlap = true;
};

class GradientReducer {
 public:
  // `params`: the parameters that get gradients, in registration order.
  GradientReducer(
      std::shared_ptr<ProcessGroup> group,
      const std::vector<at::Tensor>& params,
      const ReducerOptions& options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void arm();
  void launch_rest();
  void finish();
  void discard();

  std::size_t bucket_count() const;
  // Buckets started by hooks during the last backward (overlapped).
  std::size_t started_during_backward() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::parallel
