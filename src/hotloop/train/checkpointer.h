#pragma once
// A run's checkpoints (checkpoint_file.h is the file format): made from the
// run's state, saved when due into <run>/checkpoints (the last K kept), and, at
// the start, the one --resume names found (auto: the newest that loads) and
// restored: weights, optimizer, loss scale, generators, the position in the
// data, and what the summary needs from the part of the run before it.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/train/checkpoint_file.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/precision.h"
#include "hotloop/train/run_state.h"
#include "hotloop/train/sharded_state.h"

namespace hotloop::train {

// Where a resumed run picks up.
struct Resumed {
  std::string path;
  std::int64_t step = 0;
  std::size_t epoch = 0;
  std::size_t next_batch = 0; // in micro-batches of the current plan
  // The summary's figures of the part before (SummaryBuilder::progress())
  // and the latest evaluation before the checkpoint ({step, result}).
  nlohmann::json progress;
  nlohmann::json last_eval;
};

// What differs between a checkpoint's config (its config.json as saved) and
// the options now, among what must match on resume: "batch: 32 in the
// checkpoint, 64 now" for each option the table marks kept_on_resume
// (option_table.h) and for the model as built and the number of ranks. An
// option the checkpoint does not name is newer than it: its run had the
// option's default.
std::vector<std::string> differing_options(
    const nlohmann::json& saved,
    const TrainerOptions& now);

class Checkpointer {
 public:
  // Writes only on rank 0, into a run directory, with keep_checkpoints > 0.
  // `sharded` (--shard): each rank writes its part of the optimizer state
  // into its own shard file beside the checkpoint (checkpoint_shards.h),
  // and cuts its shards from any checkpoint on resume.
  Checkpointer(
      const RunState& s,
      const FaultInjection& faults,
      std::shared_ptr<const ShardedOptimizerState> sharded = nullptr);

  bool writes() const {
    return writes_;
  }
  // This run checkpoints at all (the same on every rank).
  bool saves() const {
    return saves_;
  }
  // Saves the run's state at s.step with `progress` (the summary so far)
  // and `last_eval`; returns the path, or "" where this process writes none.
  // Sharded: every rank calls it (each writes its shard file; ZeRO stage 3:
  // with its shards of the units' weights, which the checkpoint file then
  // lacks).
  std::string save(
      const RunState& s,
      const PrecisionMode& precision,
      const nlohmann::json& progress,
      const nlohmann::json& last_eval) const;

  // What options.resume asks for: nothing ("" in a folder without
  // checkpoints), the newest valid checkpoint (auto; each corrupt one
  // reported to `log` and skipped) or the named file. Restores the model,
  // optimizer, loss scale and generators; the caller moves the run to the
  // returned position. Throws UsageError when a fresh run would write into
  // another run's checkpoints, DataError for a file that does not load.
  // `load_model`: how the model takes the checkpoint's weights when they
  // are whole (ZeRO stage 3: a block at a time); null:
  // model::load_state_dict into s.model. A stage-3 checkpoint resumed at
  // stage 3 cuts each rank's shards of the units from its shard files.
  using ModelLoader =
      std::function<void(const model::StateDict&, const model::LoadOptions&)>;
  std::optional<Resumed> resume(
      const RunState& s,
      PrecisionMode& precision,
      const std::function<void(const std::string&)>& log,
      const ModelLoader& load_model = nullptr) const;

 private:
  // The model's weights from checkpoint `c` (at `path`): its units' from
  // the shard files where it has them.
  void load_model_weights(
      const std::string& path,
      const Checkpoint& c,
      const RunState& s,
      const ModelLoader& load_model) const;
  // The optimizer state from checkpoint `c` (at `path`), whole or sharded,
  // into the run's optimizer, whole or sharded.
  void load_optimizer(
      const std::string& path,
      const Checkpoint& c,
      const RunState& s) const;

  std::string dir_; // <run>/checkpoints
  bool saves_; // this run checkpoints (every rank)
  bool writes_; // ... and this process writes the checkpoint (rank 0)
  const FaultInjection* faults_;
  std::shared_ptr<const ShardedOptimizerState> sharded_;
};

} // namespace hotloop::train
