#pragma once
// How a data-parallel rank's gradients become the step's: the protocol every
// rank follows every step, whatever happened (an out-of-memory on some rank
// included), so that the collectives line up across ranks:
//   begin_step(n)  before a step of n micro-batches (ZeRO stage 3 plans
//                  the gathers its forward and backward passes make);
//   arm()          before the backward whose gradients are final (the last
//                  micro-batch): buckets start during backward from now on;
//   launch_rest()  after backward, or after an OOM in it: starts the buckets
//                  not started yet (stage 3: then the step's gathers not
//                  made yet), so every rank has started the same ones;
//   finish()       waits and leaves the mean gradients where the optimizer
//                  reads them; or
//   discard()      waits and throws the results away (an OOM on some rank:
//                  the step is redone);
//   after_update() once the optimizer has stepped (the sharded reducer
//                  gathers the updated parameters).
// A rank that ran out of memory mid-backward still starts every bucket
// (with whatever its buffers hold; ZeRO stages 2-3: zeros) and at stage 3
// the gathers it missed; the step-agreement all-reduce that follows
// launch_rest() tells every rank to discard.
//
// GradientReducer (gradient_reducer.h): every rank keeps whole gradients,
// all-reduced. ShardedReducer (sharded_reducer.h): ZeRO stages 1 to 3.

#include <cstddef>

namespace hotloop::parallel {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin_step(std::size_t /*micro_batches*/) {}
  virtual void arm() = 0;
  // `failed`: this rank ran out of memory part-way through the step (what
  // its buckets send is thrown away by every rank).
  virtual void launch_rest(bool failed) = 0;
  virtual void finish() = 0;
  virtual void discard() = 0;
  virtual void after_update() {}
  virtual std::size_t bucket_count() const = 0;
  // Buckets started by hooks during the last backward (overlapped).
  virtual std::size_t started_during_backward() const = 0;
};

} // namespace hotloop::parallel
