#pragma once
// A sharded run's optimizer state (--shard: each rank holds its shard of
// each flat bucket) in the layout a whole optimizer has: each parameter's
// state whole, named as Optimizer::state() names it for the whole parameter
// groups ("all.3.exp_avg"). Checkpoints hold that layout, so a sharded run's
// checkpoint resumes sharded at any stage or unsharded, and an unsharded
// run's resumes sharded: the shards are cut from it again.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/train/optimizer.h"

namespace hotloop::parallel {
class ProcessGroup;
class ShardedReducer;
} // namespace hotloop::parallel

namespace hotloop::train {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class ShardedOptimizerState {
 public:
  // `whole`: the parameter groups the optimizer would have unsharded (the
  // same names, in the same order, as the shards' groups).
  ShardedOptimizerState(
      const parallel::ShardedReducer& reducer,
      std::vector<ParamGroup> whole,
      std::shared_ptr<parallel::ProcessGroup> group);

  // The whole state from every rank's shards: a collective (every rank
  // calls it at the same point). `keep` false: this rank only gives its
  // shards (returns just the step count).
  NamedTensors gather(const Optimizer& shards, bool keep) const;
  // This rank's shards cut from a whole state into `shards`. Throws
  // DataError for a state that names a parameter only in part.
  void scatter(const NamedTensors& whole, Optimizer& shards) const;

 private:
  // Bucket b belongs to one of the optimizer's groups (else it is reduced
  // but never updated, and has no state).
  bool updated(std::size_t bucket) const;
  // Bucket b's shard name and its members' whole names, for state `kind`.
  std::string shard_name(std::size_t bucket, const char* kind) const;
  std::string member_name(std::size_t bucket, std::size_t j, const char* kind)
      const;

  const parallel::ShardedReducer* reducer_;
  std::vector<ParamGroup> whole_;
  std::shared_ptr<parallel::ProcessGroup> group_;
  std::vector<std::size_t> shard_index_; // per bucket: within its group
  std::vector<std::vector<std::size_t>> whole_index_; // per bucket, member
};

} // namespace hotloop::train
