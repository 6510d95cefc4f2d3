#pragma once
// `hotloop plan`'s arithmetic: what each rank of a data-parallel job holds in
// device memory for a configuration (ranks, ZeRO stage, optimizer offload,
// micro-batch), by kind, counted as the trainer counts its own
// (summary.json's model_state_bytes), with the activations extrapolated
// from two measured micro-batches; and the configurations to try, cheapest
// first, when the one asked for does not fit.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/train/batch_finder.h"

namespace hotloop::train {

struct PlanConfig {
  int ranks = 1;
  int shard = 0; // ZeRO stage, 0-3
  bool offload = false; // --offload optimizer
  // --activation-checkpointing stages (a ResNet's stages, each block of a
  // GPT or Llama recomputed in backward)
  bool checkpointing = false;
  std::int64_t micro_batch = 1;
  // "--shard 2 --micro-batch 8"
  std::string flags() const;
};

// The activations (and the step's other transient memory) a process holds
// above its model state, measured at two micro-batches; a straight line
// through them for any other.
struct ActivationFit {
  std::int64_t batch1 = 1;
  std::int64_t batch2 = 2;
  std::uint64_t bytes1 = 0;
  std::uint64_t bytes2 = 0;
  std::uint64_t at(std::int64_t micro_batch) const;
};

// Stage 3's units (model/shard_units.h): their trainable parameters' bytes
// in all (their shards: fp32), and the two largest units' together as they
// are gathered (whole at once: the one running and the next; in mixed
// precision their matrices in bf16). Zero: the model has none.
struct UnitSizes {
  std::uint64_t bytes = 0;
  std::uint64_t largest_two = 0;
  std::size_t count = 0; // units (with or without trainable parameters)
};

// Stages 2-3: the most a rank's whole gradient buffers being
// reduce-scattered hold at once: ShardOptions::reduces_in_flight buckets,
// each at most --bucket-mb plus the parameter that closed it. 0: every
// bucket's at once (the whole gradients).
struct ReduceSizes {
  std::uint64_t in_flight = 0;
};

struct RankMemory {
  std::uint64_t parameters = 0;
  std::uint64_t gradients = 0;
  std::uint64_t optimizer = 0;
  std::uint64_t activations = 0;
  std::uint64_t host = 0; // offloaded: the optimizer's, in host memory
  std::uint64_t device() const {
    return parameters + gradients + optimizer + activations;
  }
  nlohmann::json to_json() const;
};

// One rank's memory for `c`: the parameters whole (stages 0-2; stage 3:
// the units' 1/N, and two units whole); the gradients twice over under
// plain data parallel (the parameters' own and the all-reduce buckets),
// once at stage 1 (the buckets), 1/N from stage 2 plus, at the peak, the
// whole buffers being reduce-scattered (`reduce`, at most the whole
// gradients);
// the optimizer state whole, 1/N from stage 1, none on the device when
// offloaded (then in `host`, with the float32 copies it updates and their
// gradients).
RankMemory rank_memory(
    const ModelState& state,
    const PlanConfig& c,
    const ActivationFit& activations,
    const UnitSizes& units = {},
    const ReduceSizes& reduce = {});

struct PlanCandidate {
  PlanConfig config;
  RankMemory memory;
  bool fits = false;
};

// `asked`, then what saves memory at the least cost in speed, in that
// order: each higher ZeRO stage (more communication; 3 only for a model
// with units), then halving the
// micro-batch with gradient accumulation keeping the batch (smaller
// kernels), then activation checkpointing (a second forward of each
// block in backward) at each micro-batch where `checkpointed` (the
// activations measured with it) is given, then the optimizer offloaded to
// the host (the update on the CPU, the gradients and weights over PCIe
// each step) at each micro-batch, without and with checkpointing.
// `activations`: measured as asked. `budget`: the device memory one rank
// may use.
std::vector<PlanCandidate> plan_candidates(
    const ModelState& state,
    const PlanConfig& asked,
    const ActivationFit& activations,
    std::uint64_t budget,
    const UnitSizes& units = {},
    const ActivationFit* checkpointed = nullptr,
    const ReduceSizes& reduce = {});

} // namespace hotloop::train
