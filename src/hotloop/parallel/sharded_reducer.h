#pragma once
// ZeRO stages 1 and 2 on the data-parallel path (Rajbhandari et al. 2020):
// each rank updates only its shard of the parameters, so the optimizer
// state, and at stage 2 the gradients, are held once over the job instead of
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
//            flat one freed as soon as the collective is done.
// finish() scales the shard's gradient to the mean and, where the precision
// skips overflowing steps, makes a non-finite gradient on any rank
// non-finite on every rank (all ranks skip together). After the optimizer
// updated the shards, after_update() all-gathers each bucket's shards into
// its flat parameters: every rank's model holds the updated weights.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/parallel/gradient_buckets.h"
#include "hotloop/parallel/gradient_sync.h"
#include "hotloop/parallel/shard_layout.h"

namespace hotloop::parallel {

class ProcessGroup;

struct ShardOptions {
  int stage = 1; // 1: optimizer state; 2: + gradients
  BucketOptions buckets;
  // Loss scaling: a non-finite gradient anywhere is seen on every rank.
  bool agree_on_non_finite = false;
};

// What a rank holds of the model's training state between steps, in bytes.
struct ShardedBytes {
  std::uint64_t parameters = 0; // the flat buffers (whole, with padding)
  std::uint64_t gradients = 0; // stage 1: whole flat; stage 2: the shards
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
  // each one's optimizer group. Throws Error for a parameter that is not
  // dense in memory (it cannot be a view into a flat buffer).
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

  void arm() override;
  void launch_rest() override;
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
