#pragma once
// A sharded run's optimizer state (--shard: each rank holds its shard of
// each flat bucket) in the terms a whole optimizer has: each parameter's
// state named as Optimizer::state() names it for the whole parameter groups
// ("all.3.exp_avg"). A sharded checkpoint (checkpoint_shards.h) holds each
// rank's pieces of those tensors, so it resumes sharded at any stage and
// number of ranks, or unsharded; an unsharded run's whole state resumes
// sharded too: the shards are cut from it again.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/train/checkpoint_shards.h"
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

  // Where each rank's shards lie in the whole state (checkpoint_shards.h),
  // without an id; and this rank's pieces of it, named as the index names
  // the whole tensors.
  ShardIndex index(const Optimizer& shards) const;
  NamedTensors pieces(const Optimizer& shards) const;

  // Writes this rank's pieces into its shard file of the checkpoint of
  // `step` in `dir`: a collective (every rank calls it at the same point),
  // which returns the index (with the save's id) once every rank's file is
  // in place, and throws on every rank when one could not write its file.
  ShardIndex save(
      const std::string& dir,
      std::int64_t step,
      const Optimizer& shards) const;
  // This rank's shards cut from a sharded checkpoint (`index` in `dir`,
  // saved by any number of ranks; `head`: the optimizer tensors the
  // checkpoint file holds itself, the step count), reading only the files
  // that hold a part of them. Throws DataError naming a file that is
  // missing or is not the index's.
  void load(
      const std::string& dir,
      std::int64_t step,
      const ShardIndex& index,
      const NamedTensors& head,
      Optimizer& shards) const;
  // This rank's shards cut from a whole state into `shards`. Throws
  // DataError for a state that names a parameter only in part.
  void scatter(const NamedTensors& whole, Optimizer& shards) const;

 private:
  // f(bucket, kind, piece) for each piece of `rank`'s shards whose state
  // `kinds` (the shards' state names) has.
  template <typename F>
  void for_each_piece(const std::set<std::string>& kinds, int rank, F&& f)
      const;
  void check_complete(std::size_t bucket, const char* kind, std::size_t present)
      const;
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
