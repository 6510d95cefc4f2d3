#pragma once
// The parameters of a data-parallel model split into gradient buckets, and
// the moment each bucket's gradients are final, the way PyTorch's DDP
// reducer finds it: buckets of about `bucket_bytes` in reverse registration
// order (roughly the order backward produces their gradients), never mixing
// dtypes, devices or partitions (the optimizer's parameter groups, for the
// sharded reducer: each kind fills a bucket of its own, and the buckets are
// ordered by when their last member comes); a hook after each parameter's
// gradient accumulation counts it in, and once armed, a bucket whose gradients
// are all final is started (the owner's `start`) at once, while backward goes
// on with the earlier layers. Buckets start in bucket order on every rank, so
// the collectives the owners start match across ranks.
//
// GradientReducer (whole gradients, all-reduced) and ShardedReducer (each
// rank's shard, ZeRO) own one each.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace hotloop::parallel {

struct Bucket {
  std::vector<std::size_t> members; // indices into params()
  std::vector<std::int64_t> offsets; // of each member in the bucket
  std::int64_t numel = 0;
  int partition = 0;
};

struct BucketOptions {
  std::size_t bucket_bytes = 25u << 20;
  // false: no hooks; every bucket starts in launch_rest() (after backward).
  bool overlap = true;
};

class GradientBuckets {
 public:
  // `params`: the parameters that get gradients, in registration order;
  // `partition`: one number per parameter (empty: all one); `start(i)`:
  // called once per armed step for each bucket i, in order; `accumulated(k)`
  // (when given): after every backward's accumulation into parameter k's
  // gradient, armed or not, before it counts towards its bucket.
  GradientBuckets(
      std::vector<at::Tensor> params,
      const std::vector<int>& partition,
      const BucketOptions& options,
      std::function<void(std::size_t)> start,
      std::function<void(std::size_t)> accumulated = {});
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Before the backward whose gradients are final: hooks start buckets.
  void arm();
  // Starts the buckets not started yet (all of them when nothing was
  // armed), so that every rank has started the same collectives.
  void launch_rest();
  // Ready for the next step (after the owner waited for every bucket).
  void reset();

  const std::vector<at::Tensor>& params() const;
  const std::vector<Bucket>& buckets() const;
  // Buckets started by hooks during the last backward (overlapped).
  std::size_t started_during_backward() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::parallel
