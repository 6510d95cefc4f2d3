#pragma once
// ZeRO stage 3's hooks in the model's forward (model/shard_units.h): each
// unit's parameters gathered from the ranks' shards just before it runs and
// freed after; in training, gathered again just before its backward (a
// hook on its output's gradient, which is whole once the next unit's
// backward is done, so that unit is freed then); a training forward starts
// with every unit freed. The next unit's gather
// (in backward, the previous one's) is started while one computes, so at
// most two units are whole at a time. The last units backward gathers are
// freed by the reducer's finish().

#include <cstddef>
#include <functional>
#include <vector>

#include "hotloop/model/shard_units.h"

namespace hotloop::parallel {
class ShardedReducer;
}

namespace hotloop::train {

// Each of `tensors`' unit in `model` (its index in shard_units(), -1 for
// one outside every unit): ShardOptions::units.
std::vector<int> units_of(
    const model::ShardUnits& model,
    const std::vector<at::Tensor>& tensors);

class UnitGather final : public model::UnitHooks {
 public:
  // Called once a unit's parameters are whole (and the next unit's gather
  // started), in its forward (`backward` false) and its backward: the
  // fault seam (HOTLOOP_INJECT_OOM_UNIT).
  using Probe = std::function<void(std::size_t unit, bool backward)>;

  // Installs itself in `model` (which must outlive it) and takes itself
  // out when destroyed: the model may outlive its trainer (a set-up or a
  // fit that threw).
  UnitGather(
      parallel::ShardedReducer& reducer,
      model::ShardUnits& model,
      Probe probe = {});
  ~UnitGather() override;
  UnitGather(const UnitGather&) = delete;
  UnitGather& operator=(const UnitGather&) = delete;

  void before(std::size_t unit) override;
  void after(std::size_t unit, const at::Tensor& out) override;

 private:
  parallel::ShardedReducer* reducer_;
  model::ShardUnits* model_;
  Probe probe_;
};

} // namespace hotloop::train
