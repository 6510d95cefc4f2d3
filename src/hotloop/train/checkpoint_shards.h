#pragma once
// A sharded run's checkpoint (--shard): no rank ever holds the whole
// optimizer state (nor, at stage 3, the whole model), so each rank writes
// its part into its own file beside the checkpoint,
// step-<N>.rank-<R>-of-<W>.safetensors, and rank 0 writes the checkpoint
// itself (step-<N>.safetensors: the model but for stage 3's units, the step
// count, the loss scale, the generators, the position) once every rank's
// file is in place. The checkpoint's metadata holds the indexes: for each
// whole optimizer-state tensor ("all.3.exp_avg", as an unsharded optimizer
// names it), and at stage 3 for each of the units' weights ("model/" and
// the model's name, as the checkpoint file names the model's), its shape and
// memory layout, and which rank's file holds which run of its elements. Only
// the pieces depend on how the run was sharded, so the state is cut again
// for any number of ranks, or put back together whole (resuming unsharded,
// `--init`, `hotloop weights consolidate`).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/model/weights.h"
#include "hotloop/train/checkpoint_file.h"

namespace hotloop::train {

// Elements [from, from + count) of a tensor's memory-order elements, in
// rank `rank`'s file.
struct ShardPiece {
  int rank = 0;
  std::int64_t from = 0;
  std::int64_t count = 0;
};

struct ShardedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides; // the memory order of the elements
  std::vector<ShardPiece> pieces;
  std::int64_t numel() const;
};

struct ShardIndex {
  std::string id; // one per save, in each of its files: a stray file shows
  int ranks = 0;
  std::vector<ShardedTensor> tensors;
  // The model's index: every model tensor's name (without kModelPieces) in
  // the model's order, those in the checkpoint file and those in the shard
  // files together. Empty in the optimizer's.
  std::vector<std::string> order;

  nlohmann::json to_json() const;
  // Throws DataError naming `where` for an index that does not parse.
  static ShardIndex from_json(
      const nlohmann::json& j,
      const std::string& where);
};

// What to do about a shard file that is missing or not the index's.
inline constexpr const char* kRestoreShardsHint =
    "put the checkpoint folder back as the run wrote it, or resume from an older checkpoint (--resume PATH)";

// The checkpoint meta keys of the indexes (absent: the state is whole; the
// model's is there only with the optimizer's, indexing the same files).
inline constexpr const char* kShardIndexKey = "optimizer_shards";
inline constexpr const char* kModelShardIndexKey = "model_shards";
// How a shard file and the model index name the model's pieces: this and
// the model's name.
inline constexpr const char* kModelPieces = "model/";

// <dir>/step-<step>.rank-<rank>-of-<ranks>.safetensors
std::string shard_file_path(
    const std::string& dir,
    std::int64_t step,
    int rank,
    int ranks);

// Writes rank `rank`'s pieces (1-D, named as the index names the tensors
// they are pieces of) atomically, stamped with the index's id, the step and
// the rank.
void write_shard_file(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    int rank,
    const model::StateDict& pieces);

// Rank `rank`'s pieces of the checkpoint of `step` in `dir`. Throws
// DataError naming the file when it is missing, corrupt, or belongs to
// another save or rank than the index says.
model::StateDict read_shard_file(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    int rank);

// The shard files of a checkpoint whose metadata is `meta` (in `dir`) that
// are not there; empty for an unsharded checkpoint.
std::vector<std::string> missing_shard_files(
    const std::string& dir,
    const nlohmann::json& meta);

// Each tensor of the index put back together from every rank's file,
// contiguous, in the index's order.
model::StateDict whole_tensors(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index);

// `head` (the model's tensors a checkpoint file holds) with the model's
// pieces in the shard files (`index`, the model's) put back together, in
// the model's order.
model::StateDict whole_model(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    const model::StateDict& head);

// The checkpoint at `path` with its optimizer state and model whole: a
// sharded one's put back together from its shard files (and its indexes
// dropped), an unsharded one as it is.
Checkpoint load_whole_checkpoint(const std::string& path);

// A weight file as --init and the commands that take weights read it, with
// a stage-3 checkpoint's model put back together from its shard files (the
// checkpoint file alone lacks the units' weights).
model::WeightFile read_whole_weights(const std::string& path);

// Removes the shard files in `dir` of steps at most `up_to` that no
// checkpoint there holds: a save that was stopped before its checkpoint was
// written, a checkpoint deleted as older than the last K, and (where
// `ranks_at_up_to` > 0) step `up_to`'s files of another number of ranks
// (saved again since). Each removed file is reported to `log` (may be
// empty).
void remove_orphan_shards(
    const std::string& dir,
    std::int64_t up_to,
    int ranks_at_up_to,
    const std::function<void(const std::string&)>& log = {});

} // namespace hotloop::train
