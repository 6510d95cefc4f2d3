#pragma once
// ShardedReducer's state and its steps, shared by the two files that
// implement it: sharded_reducer.cpp (the flat buckets, the gradients'
// reduction, the update's gather) and sharded_units.cpp (stage 3: each
// unit's whole parameters allocated, gathered and freed, in the compute
// type or fp32; the model whole after training, or a unit at a time).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/parallel/gradient_buckets.h"
#include "hotloop/parallel/shard_layout.h"
#include "hotloop/parallel/sharded_reducer.h"

namespace hotloop::parallel {

class ProcessGroup;

inline constexpr const char* kGather = "parameter all-gather";

struct ShardedReducer::Impl {
  std::shared_ptr<ProcessGroup> group;
  // Stage 3: the units' gathers' own group, so that a rank that ran out of
  // memory part-way through a step can make the gathers it missed in their
  // order (catch_up) while the gradients' reduce-scatters keep theirs.
  std::shared_ptr<ProcessGroup> unit_group;
  ShardOptions options;
  int rank = 0;
  int ranks = 1;
  std::unique_ptr<GradientBuckets> buckets;
  std::vector<ShardLayout> layouts; // per bucket
  std::vector<at::Tensor> flat_params; // per bucket: the parameters' storage
  std::vector<Shard> shards; // per bucket: views into flat_params (stage 3
                             // units: tensors of their own)
  std::vector<int> group_of; // per bucket: its optimizer group
  std::vector<at::Tensor> flat_grads; // stage 1: whole; stage 2: the shard
  std::vector<at::Tensor> sending; // stage 2: whole, while reduce-scattered
  std::vector<std::function<void()>> wait; // per bucket, set once started
  // Stages 2-3: the buckets whose sending buffers are alive, oldest first,
  // and their bytes now and at most; a failed rank's zeros (launch_rest).
  std::deque<std::size_t> reducing;
  std::uint64_t reducing_bytes = 0;
  std::uint64_t peak_reducing = 0;
  at::Tensor zeros;
  bool failed = false;
  // Stage 3: per bucket, its unit (-1: kept whole) and whether its flat
  // parameters hold memory now; per unit, its buckets.
  std::vector<int> unit_of;
  std::vector<char> whole;
  std::vector<std::vector<std::size_t>> unit_buckets;
  std::vector<std::function<void()>> pending; // per unit: a gather to wait
  // Stage 3 in a compute type: per bucket, whether its unit is gathered in
  // it, and while kept whole its fp32 flat parameters; per parameter of
  // such a bucket, its view into the compute buffer and its gradient
  // summed in fp32 over the micro-batches.
  std::vector<char> lowered;
  std::vector<at::Tensor> master;
  std::vector<at::Tensor> compute_views;
  std::vector<at::Tensor> accumulated;
  // Stage 3: the step begun (begin_step), its micro-batches (0: none), and
  // the units whose gathers it has started, in order.
  std::size_t micro_batches = 0;
  std::vector<std::size_t> started_units;
  bool armed = false;
  bool keep_whole = false;
  std::uint64_t units_whole_bytes = 0; // now, outside keep_whole
  std::uint64_t peak_units = 0;

  // Bucket i's whole flat parameters, padding included, in bytes.
  std::uint64_t flat_bytes(std::size_t i) const {
    return static_cast<std::uint64_t>(layouts[i].padded) *
        flat_params[i].element_size();
  }

  // The buckets and their gradients (sharded_reducer.cpp).
  // Moves bucket i's parameters into one flat buffer they then view.
  void flatten(std::size_t i);
  // The bucket's gradients, in the parameters' memory order, into `into`
  // (padding zero); the parameters' own gradients freed.
  void gather_gradients(std::size_t i, at::Tensor& into);
  // A lowered parameter's gradient, each micro-batch's added into an fp32
  // sum as backward makes it (the last one's reduced as it is when it is
  // the only one).
  void on_accumulated(std::size_t k);
  void start(std::size_t i);
  // Waits for the oldest reduce-scatter and frees its sending buffer.
  void retire_oldest();
  void wait_all();
  // The shard's part of bucket i's summed gradients.
  at::Tensor shard_gradient(std::size_t i) const;
  // A non-finite gradient on any rank makes every rank's non-finite.
  void agree_on_non_finite(const std::vector<at::Tensor>& grads);

  // Stage 3's units: their whole parameters allocated, gathered and
  // freed (sharded_units.cpp).

  // Buckets `wanted` whole (lowered ones as their fp32 masters), each one
  // allocated added to `done`; the error that stopped it, or null.
  std::exception_ptr allocate_whole(
      const std::vector<std::size_t>& wanted,
      std::vector<std::size_t>& done);
  // Whether every rank allocated what it wanted (`failed` null on all): a
  // collective, so that a rank short of memory stops none in a gather.
  bool all_allocated(const std::exception_ptr& failed, const char* what);
  // Bucket i's flat parameters lose their memory (the views keep their
  // shape and the storage object, which autograd's saved tensors hold)...
  void free_flat(std::size_t i);
  // ... and get it back, holding whatever was there.
  void allocate_flat(std::size_t i);
  // Kept whole, a lowered bucket's parameters view fp32 flat parameters
  // of their own (the master weights, as a checkpoint holds them).
  void allocate_master(std::size_t i);
  // Back to the compute type, `written`: the master weights were changed
  // (a checkpoint loaded), so the shard is taken from them.
  void drop_master(std::size_t i, bool written);
  // Bucket i, whole, freed again (the master weights dropped where they
  // are the parameters); `written`: its shard taken from them first.
  void unwhole(std::size_t i, bool written);
  // What bucket i's gather sends: its shard, or (into flat parameters in
  // the compute type) a copy of it in that type, made before any of a
  // unit's collectives starts.
  at::Tensor gather_source(std::size_t i) const;
  // Starts gathering `source` (gather_source(i)) into bucket i's whole
  // parameters: the master ones where they are, else the flat ones.
  std::function<void()> start_bucket_gather(std::size_t i, at::Tensor source);
  // Starts the gathers of `buckets` (their whole parameters allocated):
  // what each sends made first, so that an allocation that fails starts
  // no collective.
  std::vector<std::function<void()>> start_gathers(
      const std::vector<std::size_t>& buckets);
  // Starts gathering unit u's parameters (their memory allocated now).
  void start_gather(std::size_t unit);
  // Unit u's parameters whole: gathered now, or the prefetch waited for.
  void gather(std::size_t unit);
  void finish_gather(std::size_t unit);
  void release(std::size_t unit);
  void release_all();
  // The units' gathers a step of `micro_batches` makes on every rank: each
  // micro-batch's forward gathers every unit that has buckets in order
  // (it starts with every unit freed), its backward in reverse
  // (unit_gather.h).
  std::vector<std::size_t> step_schedule() const;
  // A rank that stopped part-way through the step (out of memory) waits
  // for the gathers it started, frees every unit and makes the rest of the
  // step's gathers, a unit at a time, so that the others' find their
  // partner; nothing where it made them all.
  void catch_up();
};

} // namespace hotloop::parallel
