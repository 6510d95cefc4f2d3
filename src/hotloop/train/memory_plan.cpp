#include "hotloop/train/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace hotloop::train {

namespace {

std::uint64_t per_rank(std::uint64_t bytes, int ranks) {
  const auto n = static_cast<std::uint64_t>(std::max(1, ranks));
  return (bytes + n - 1) / n;
}

} // namespace

std::string PlanConfig::flags() const {
  std::string out = fmt::format("--shard {}", shard);
  if (offload) {
    out += " --offload optimizer";
  }
  if (checkpointing) {
    out += " --activation-checkpointing stages";
  }
  return out + fmt::format(" --micro-batch {}", micro_batch);
}

std::uint64_t ActivationFit::at(std::int64_t micro_batch) const {
  const double slope = batch2 == batch1
      ? 0.0
      : (static_cast<double>(bytes2) - static_cast<double>(bytes1)) /
          static_cast<double>(batch2 - batch1);
  const double v = static_cast<double>(bytes1) +
      slope * static_cast<double>(micro_batch - batch1);
  return v <= 0 ? 0 : static_cast<std::uint64_t>(v);
}

nlohmann::json RankMemory::to_json() const {
  return {
      {"parameters", parameters},
      {"gradients", gradients},
      {"optimizer", optimizer},
      {"activations", activations},
      {"device", device()},
      {"host", host}};
}

RankMemory rank_memory(
    const ModelState& state,
    const PlanConfig& c,
    const ActivationFit& activations,
    const UnitSizes& units,
    const ReduceSizes& reduce) {
  RankMemory m;
  m.parameters = state.weight_bytes;
  if (c.shard >= 3 && units.bytes > 0) {
    m.parameters = state.weight_bytes - units.bytes +
        per_rank(units.bytes, c.ranks) + units.largest_two;
  }
  if (c.shard >= 2) {
    // The shard's, and the whole buffers being reduce-scattered.
    const std::uint64_t in_flight = reduce.in_flight > 0
        ? std::min(reduce.in_flight, state.gradient_bytes)
        : state.gradient_bytes;
    m.gradients = per_rank(state.gradient_bytes, c.ranks) + in_flight;
  } else if (c.shard == 1 || c.ranks == 1) {
    m.gradients = state.gradient_bytes;
  } else {
    m.gradients = 2 * state.gradient_bytes;
  }
  const int sharers = c.shard >= 1 ? c.ranks : 1;
  const std::uint64_t optimizer = per_rank(state.optimizer_bytes, sharers);
  if (c.offload) {
    m.host = optimizer + 2 * per_rank(state.gradient_bytes, sharers);
  } else {
    m.optimizer = optimizer;
  }
  m.activations = activations.at(c.micro_batch);
  return m;
}

std::vector<PlanCandidate> plan_candidates(
    const ModelState& state,
    const PlanConfig& asked,
    const ActivationFit& activations,
    std::uint64_t budget,
    const UnitSizes& units,
    const ActivationFit* checkpointed,
    const ReduceSizes& reduce) {
  std::vector<PlanConfig> order = {asked};
  auto add = [&order](PlanConfig c) {
    if (std::find_if(order.begin(), order.end(), [&c](const PlanConfig& o) {
          return o.shard == c.shard && o.offload == c.offload &&
              o.checkpointing == c.checkpointing &&
              o.micro_batch == c.micro_batch;
        }) == order.end()) {
      order.push_back(c);
    }
  };
  PlanConfig c = asked;
  const int top = asked.ranks < 2 ? 0 : units.bytes > 0 ? 3 : 2;
  for (c.shard = asked.shard + 1; c.shard <= top; ++c.shard) {
    add(c);
  }
  c.shard = std::max(asked.shard, top);
  const bool can_checkpoint = checkpointed != nullptr && !asked.checkpointing;
  for (bool offload : {false, true}) {
    c.offload = asked.offload || offload;
    for (bool checkpointing : {false, true}) {
      if (checkpointing && !can_checkpoint) {
        continue;
      }
      c.checkpointing = asked.checkpointing || checkpointing;
      for (c.micro_batch = asked.micro_batch; c.micro_batch >= 1;
           c.micro_batch /= 2) {
        add(c);
      }
    }
  }
  std::vector<PlanCandidate> out;
  for (const PlanConfig& config : order) {
    PlanCandidate p;
    p.config = config;
    p.memory = rank_memory(
        state,
        config,
        config.checkpointing && can_checkpoint ? *checkpointed : activations,
        units,
        reduce);
    p.fits = p.memory.device() <= budget;
    out.push_back(p);
  }
  return out;
}

} // namespace hotloop::train
