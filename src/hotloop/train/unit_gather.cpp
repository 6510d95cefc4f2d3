#include "hotloop/train/unit_gather.h"

#include <map>
#include <utility>

#include <ATen/core/grad_mode.h>

#include "hotloop/parallel/sharded_reducer.h"

namespace hotloop::train {

UnitGather::UnitGather(
    parallel::ShardedReducer& reducer,
    model::ShardUnits& model,
    Probe probe)
    : reducer_(&reducer), model_(&model), probe_(std::move(probe)) {
  model_->set_unit_hooks(this);
}

UnitGather::~UnitGather() {
  model_->set_unit_hooks(nullptr);
}

std::vector<int> units_of(
    const model::ShardUnits& model,
    const std::vector<at::Tensor>& tensors) {
  std::map<const c10::TensorImpl*, int> unit;
  const auto units = model.shard_units();
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const at::Tensor& p : units[u]->parameters()) {
      unit.emplace(p.unsafeGetTensorImpl(), static_cast<int>(u));
    }
  }
  std::vector<int> out;
  for (const at::Tensor& t : tensors) {
    const auto it = unit.find(t.unsafeGetTensorImpl());
    out.push_back(it == unit.end() ? -1 : it->second);
  }
  return out;
}

void UnitGather::before(std::size_t unit) {
  if (unit == 0 && at::GradMode::is_enabled()) {
    // A training forward starts with every unit freed, whatever the
    // backward before left whole (its last hook's unit, or the one after
    // a unit without buckets): every micro-batch gathers the same units
    // in the same order, which a rank that ran out of memory replays.
    for (std::size_t u = 0; u < reducer_->unit_count(); ++u) {
      reducer_->release_unit(u);
    }
  }
  reducer_->gather_unit(unit);
  reducer_->prefetch_unit(unit + 1); // while this one computes
  if (probe_ && at::GradMode::is_enabled()) {
    probe_(unit, /*backward=*/false);
  }
}

void UnitGather::after(std::size_t unit, const at::Tensor& out) {
  if (at::GradMode::is_enabled() && out.requires_grad()) {
    parallel::ShardedReducer* reducer = reducer_;
    const Probe* probe = &probe_;
    out.register_hook([reducer, probe, unit](const at::Tensor&) {
      reducer->release_unit(unit + 1); // its backward is done
      reducer->gather_unit(unit);
      if (unit > 0) {
        reducer->prefetch_unit(unit - 1); // while this one's backward runs
      }
      if (*probe) {
        (*probe)(unit, /*backward=*/true);
      }
    });
  }
  reducer_->release_unit(unit);
}

} // namespace hotloop::train
