#pragma once
// A sharded run's optimizer state (--shard: each rank holds its shard of
// each flat bucket) in the terms a whole optimizer has: each parameter's
// state named as Optimizer::state() names it for the whole parameter groups
// ("all.3.exp_avg"), and at stage 3 the units' weights too, which no rank
// holds whole between steps: each named as the model names it. A sharded
// checkpoint (checkpoint_shards.h) holds each rank's pieces of those
// tensors, so it resumes sharded at any stage and number of ranks, or
// unsharded; an unsharded run's whole state resumes sharded too: the shards
// are cut from it again.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
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
  // same names, in the same order, as the shards' groups). `names` (stage
  // 3): each of the reducer's parameters' names in the model's state dict;
  // given, a save holds the units' weights in the shard files and a resume
  // cuts their shards from them.
  ShardedOptimizerState(
      const parallel::ShardedReducer& reducer,
      std::vector<ParamGroup> whole,
      std::shared_ptr<parallel::ProcessGroup> group,
      std::vector<std::string> names = {});

  // The units' weights are saved in the shard files (stage 3, with names).
  bool shards_model() const;

  // Where each rank's shards lie in the whole state (checkpoint_shards.h),
  // without an id; and this rank's pieces of it, named as the index names
  // the whole tensors.
  ShardIndex index(const Optimizer& shards) const;
  NamedTensors pieces(const Optimizer& shards) const;

  // Writes this rank's pieces (of the optimizer state; with shards_model()
  // of the units' weights too, named kModelPieces + the model's name) into
  // its shard file of the checkpoint of `step` in `dir`: a collective (every
  // rank calls it at the same point), which returns the indexes (with the
  // save's id) once every rank's file is in place, and throws on every rank
  // when one could not write its file.
  struct Saved {
    ShardIndex optimizer;
    std::optional<ShardIndex> model; // shards_model(): the units' weights
  };
  Saved save(const std::string& dir, std::int64_t step, const Optimizer& shards)
      const;
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

  // Model weights (shards_model()). Whether a checkpoint's model index
  // names exactly the units' parameters, in their shapes and memory
  // layouts: then cut_model() takes this rank's shards of them from its
  // files (else the weights are put back together whole and loaded so).
  bool can_cut_model(const ShardIndex& index) const;
  // `t` is one of the units' parameters (sharded between steps).
  bool in_unit(const at::Tensor& t) const;
  // This rank's shards of the units' weights (the fp32 masters) cut from
  // the checkpoint of `step` in `dir` whose model index is `index`, reading
  // only the files that hold a part of them; the units are gathered from
  // them at their next use. Throws DataError naming a file that is missing
  // or is not the index's.
  void cut_model(
      const std::string& dir,
      std::int64_t step,
      const ShardIndex& index) const;

 private:
  // f(bucket, kind, piece) for each piece of `rank`'s shards whose state
  // `kinds` (the shards' state names) has.
  template <typename F>
  void for_each_piece(const std::set<std::string>& kinds, int rank, F&& f)
      const;
  void check_complete(std::size_t bucket, const char* kind, std::size_t present)
      const;
  // One run of elements to copy out of a saved rank's shard file.
  struct Copy {
    int rank;
    std::string name;
    std::int64_t from; // in the saved piece
    at::Tensor to;
  };
  // The copies that fill `shard`, bucket b's shard on this rank, from the
  // saved pieces of its members (member j named name_of(j) in `saved`);
  // false where one was saved in another shape or memory layout.
  template <typename Name>
  bool plan_copies(
      std::size_t bucket,
      Name&& name_of,
      const std::map<std::string, const ShardedTensor*>& saved,
      const at::Tensor& shard,
      std::vector<Copy>& copies) const;
  // Runs `copies`, reading each saved rank's file that has one, once.
  static void read_copies(
      const std::string& dir,
      std::int64_t step,
      const ShardIndex& index,
      const std::vector<Copy>& copies);
  // The units' weights: where each rank's shards lie in them (without an
  // id or order), and this rank's pieces (of the fp32 masters).
  ShardIndex model_index() const;
  NamedTensors model_pieces() const;
  // Bucket b's parameters' numbers of elements.
  std::vector<std::int64_t> numels(std::size_t bucket) const;
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
  std::vector<std::string> names_; // per reducer parameter (stage 3)
  std::unordered_set<const c10::TensorImpl*> in_units_; // stage 3's sharded
};

} // namespace hotloop::train
