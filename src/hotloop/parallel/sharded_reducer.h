#pragma once
// ZeRO stages 1 to 3 on the data-parallel path (Rajbhandari et al. 2020):
// each rank updates only its shard of the parameters, so the optimizer
// state, at stage 2 the gradients too, and at stage 3 the parameters of the
// model's units (its blocks) as well, are held once over the job instead of
// once per rank.
//
// At construction the trainable parameters move into flat buffers, one per
// gradient bucket (gradient_buckets.h: reverse registration order, never
// mixing the optimizer's parameter groups), padded with zeros to a multiple
// of the ranks (shard_layout.h); the model's parameters become views into
// them, so that nothing else changes for the model. Rank r's shard of each
// bucket (a view too) is what the optimizer gets as its parameter.
//
// A step (gradient_sync.h's protocol): when a bucket's gradients are final
// (during backward, or all after it) they are copied into a flat buffer in
// the parameters' memory order and the parameters' own gradients freed;
//   stage 1: the flat gradients are all-reduced (kept whole, as plain data
//            parallel keeps its buckets), the shard's part is its gradient;
//   stage 2: they are reduce-scattered into a shard-sized buffer, the whole
//            flat one freed once the collective is done: at most
//            ShardOptions::reduces_in_flight of them at a time (a bucket
//            that would be one more waits for the oldest first; on NCCL
//            the compute stream waits, the host does not).
// finish() scales the shard's gradient to the mean and, where the precision
// skips overflowing steps, makes a non-finite gradient on any rank
// non-finite on every rank (all ranks skip together). After the optimizer
// updated the shards, after_update() all-gathers each bucket's shards into
// its flat parameters: every rank's model holds the updated weights.
//
// Stage 3: the parameters of each unit (ShardOptions::units: a transformer
// block, a ResNet stage) fill buckets of their own, whose shard is a tensor
// of its own and whose flat parameters hold no memory between uses:
// gather_unit() allocates them and all-gathers the shards into them just
// before the unit runs (forward, and again before its backward; the next
// unit's gather is started while one computes: prefetch_unit()), and
// release_unit() frees them after. The parameters outside the units stay
// whole, as at stage 2. The units' gathers have a process group of their
// own: a rank that ran out of memory part-way through a step starts the
// buckets it did not start (from zeros, waiting for none), then makes the
// gathers it missed, in the order every step makes them (each micro-batch
// forward through the units, backward back), so that every rank reaches
// the step's agreement and the step is redone at a smaller micro-batch
// (OOM recovery, as at stages 1-2). After
// training try_whole() makes every unit whole where every rank can hold the
// model; each_unit_whole() reads or writes it a unit at a time instead.
//
// Stage 3 in mixed precision (ShardOptions::compute_dtype, FSDP's
// param_dtype bf16 with reduce_dtype fp32): a unit's matrices (linear and
// convolution weights, which autocast casts to bf16 anyway) have buckets of
// their own whose shard stays in fp32, the optimizer's master copy, and is
// gathered as a bf16 copy into bf16 flat parameters, the ones the unit
// computes with (half the gather's bytes and the whole unit's memory); its
// vectors (norms' weights, biases) stay fp32, as autocast computes with
// them. The matrices' bf16 gradients are reduced in
// fp32 (copied into the fp32 buffer the reduce-scatter sends); under
// gradient accumulation each micro-batch's are added into an fp32 sum as
// backward makes them, as an fp32 model's accumulate. Where the model is
// read or written whole the units are gathered in fp32 instead (the
// master weights).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "hotloop/parallel/gradient_buckets.h"
#include "hotloop/parallel/gradient_sync.h"
#include "hotloop/parallel/shard_layout.h"

namespace hotloop::parallel {

class ProcessGroup;

struct ShardOptions {
  int stage = 1; // 1: optimizer state; 2: + gradients; 3: + parameters
  // Stage 3: each parameter's unit (0, 1, ... in the order forward runs
  // them), -1 for one outside every unit (kept whole); empty: none.
  std::vector<int> units;
  // Stage 3: the type the units' parameters are gathered and computed in
  // (mixed precision: bf16; their shards and the reduction stay fp32).
  // Undefined: the parameters' own.
  c10::ScalarType compute_dtype = c10::ScalarType::Undefined;
  BucketOptions buckets;
  // Loss scaling: a non-finite gradient anywhere is seen on every rank.
  bool agree_on_non_finite = false;
  // Stages 2-3: the buckets whose whole gradients may be in flight at once
  // (being reduce-scattered); a bucket that would be one more first waits
  // for the oldest, whose whole buffer is then freed. 0: no bound (every
  // bucket's whole buffer lives until finish()).
  std::size_t reduces_in_flight = 2;
};

// What a rank holds of the model's training state between steps, in bytes.
struct ShardedBytes {
  // Between steps: the flat buffers (whole, with padding); stage 3: the
  // units' shards instead of theirs.
  std::uint64_t parameters = 0;
  std::uint64_t gradients = 0; // stage 1: whole flat; stage 2: the shards
  // Stage 3: the largest unit's flat parameters, and the most the units
  // held whole at once (outside set_whole: the one running and the next
  // one being gathered) since construction.
  std::uint64_t largest_unit = 0;
  std::uint64_t peak_units = 0;
  // Stages 2-3: the largest bucket's whole gradient buffer, and the most
  // the buffers being reduce-scattered held at once since construction.
  std::uint64_t largest_bucket = 0;
  std::uint64_t peak_reducing = 0;
};

// `flat`'s elements [offset, offset + p.numel()) seen as `p` is laid out in
// memory (its sizes and strides: a channels-last weight stays so): where a
// parameter, its gradient or its optimizer state lives in a flat bucket.
at::Tensor laid_out_as(
    const at::Tensor& flat,
    std::int64_t offset,
    const at::Tensor& p);

class ShardedReducer : public GradientSync {
 public:
  // `params`: the trainable parameters in registration order; `partition`:
  // each one's optimizer group (a bucket's shard has its group's number).
  // Throws Error for a parameter that is not dense in memory (it cannot be
  // a view into a flat buffer).
  ShardedReducer(
      std::shared_ptr<ProcessGroup> group,
      const std::vector<at::Tensor>& params,
      const std::vector<int>& partition,
      const ShardOptions& options);
  ~ShardedReducer() override;
  ShardedReducer(const ShardedReducer&) = delete;
  ShardedReducer& operator=(const ShardedReducer&) = delete;

  // This rank's part of each bucket's flat parameters, in bucket order:
  // what the optimizer updates (its gradient is set by finish()).
  struct Shard {
    at::Tensor tensor;
    int partition = 0;
  };
  const std::vector<Shard>& shards() const;
  const std::vector<Bucket>& buckets() const;
  const std::vector<at::Tensor>& params() const; // the buckets' members
  const ShardLayout& layout(std::size_t bucket) const;
  int stage() const;
  int rank() const;
  ShardedBytes bytes() const;
  // Stage 3: the units that have buckets (0 when nothing is sharded so),
  // and bucket b's unit (-1: its parameters stay whole, as at stage 2).
  std::size_t unit_count() const;
  int unit_of(std::size_t bucket) const;

  // Stage 3 (collectives: every rank calls them in the same order). Unit
  // u's parameters whole (a no-op when they are; waits for a prefetch);
  // their gather started without waiting (the next unit's, while this one
  // computes); freed again (after any gather into them is done).
  void gather_unit(std::size_t unit);
  void prefetch_unit(std::size_t unit);
  void release_unit(std::size_t unit);
  // true: every unit whole until set_whole(false), release_unit doing
  // nothing. false: each unit freed; `written`: the parameters were written
  // while whole (a checkpoint loaded), so each shard is taken from them.
  void set_whole(bool whole, bool written = false);
  // The end of training: every unit whole (as set_whole(true)) where every
  // rank can hold the whole model. Each rank allocates every unit's whole
  // buffers first and calls `allocated` (a test's fault may throw there),
  // then the ranks agree; only then are the units gathered. false where a
  // rank ran out of memory: every rank frees what it allocated and the
  // units stay sharded. A collective.
  bool try_whole(const std::function<void()>& allocated = {});
  // The whole model read (the final weights of a run that ends sharded) or
  // written (a resume of whole weights) one unit at a time: each unit in
  // turn gathered in fp32 (the ranks agreeing first that each could
  // allocate it; else every rank throws), `visit(unit, params)` called
  // with its parameters (as the model holds them) while they are whole,
  // then (`written`: each shard taken from them first) freed again; units
  // already whole (set_whole) are visited as they are. A visit that throws
  // leaves its unit freed, its shards as they were; the other ranks are
  // still in the loop, so a caller whose visit may fail on one rank alone
  // catches there and goes on (Trainer's final weights do).
  void each_unit_whole(
      const std::function<void(std::size_t, const std::vector<at::Tensor>&)>&
          visit,
      bool written = false);
  // Every parameter that lives in a unit's buckets (stage 3's sharded ones).
  std::vector<at::Tensor> unit_params() const;

  void begin_step(std::size_t micro_batches) override;
  void arm() override;
  // Starts the buckets not started. `failed` (this rank ran out of memory
  // part-way): they send zeros, from one buffer, without waiting for any
  // (the others may be waiting for them before their next gather), and
  // then, at stage 3, the step's unit gathers this rank missed are made.
  void launch_rest(bool failed) override;
  void finish() override;
  void discard() override;
  void after_update() override;
  std::size_t bucket_count() const override;
  std::size_t started_during_backward() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::parallel
