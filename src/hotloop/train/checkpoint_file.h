#pragma once
// Run checkpoints: model, optimizer, loss scaler, RNG states and the position
// (step, epoch, next batch) in one safetensors file with a CRC-32 of its data,
// written atomically as <dir>/step-<N>.safetensors; the last K are kept.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/model/weights.h"

namespace hotloop::train {

// The metadata key of a checkpoint's `meta` (a JSON object).
inline constexpr const char* kCheckpointMetaKey = "hotloop.checkpoint";

struct Checkpoint {
  nlohmann::json meta; // step, epoch, next_batch, config, hotloop version
  model::StateDict model;
  model::StateDict optimizer;
  model::StateDict scaler;
  model::StateDict rng; // "cpu", "cuda"
};

// Creates the folder checkpoints go into; throws DataError where it cannot.
void create_checkpoint_dir(const std::string& dir);

// Writes `checkpoint` as the file `path`, atomically. `before_commit` (may
// be empty): see write_weights.
void write_checkpoint(
    const std::string& path,
    const Checkpoint& checkpoint,
    const std::function<void()>& before_commit = {});

// Writes `checkpoint` as <dir>/step-<step>.safetensors (creating `dir`), then
// deletes all but the newest `keep` (and their shard files:
// checkpoint_shards.h). Returns the path. `before_commit`: as above.
std::string save_checkpoint(
    const std::string& dir,
    std::int64_t step,
    const Checkpoint& checkpoint,
    int keep,
    const std::function<void()>& before_commit = {});

// Reads and verifies one checkpoint (a sharded one's optimizer state, and
// stage 3's units' weights, stay in its shard files: load_whole_checkpoint).
// Throws DataError naming the file when it is corrupt (checksum, truncation),
// not a hotloop checkpoint, or sharded with a shard file missing.
Checkpoint load_checkpoint(const std::string& path);

// The checkpoints in `dir`, newest (highest step) first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// The newest checkpoint in `dir` that loads; each corrupt one is reported to
// `warn` and skipped. nullopt when there is none.
std::optional<std::pair<std::string, Checkpoint>> newest_valid_checkpoint(
    const std::string& dir,
    const std::function<void(const std::string&)>& warn);

} // namespace hotloop::train
