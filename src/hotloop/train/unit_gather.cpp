#include "hotloop/train/unit_gather.h"

#include <ATen/core/grad_mode.h>

#include "hotloop/parallel/sharded_reducer.h"

namespace hotloop::train {

UnitGather::UnitGather(
    parallel::ShardedReducer& reducer,
    model::ShardUnits& model)
    : reducer_(&reducer), model_(&model) {
  model_->set_unit_hooks(this);
}

UnitGather::~UnitGather() {
  model_->set_unit_hooks(nullptr);
}

void UnitGather::before(std::size_t unit) {
  reducer_->gather_unit(unit);
  reducer_->prefetch_unit(unit + 1); // while this one computes
}

void UnitGather::after(std::size_t unit, const at::Tensor& out) {
  if (at::GradMode::is_enabled() && out.requires_grad()) {
    parallel::ShardedReducer* reducer = reducer_;
    out.register_hook([reducer, unit](const at::Tensor&) {
      reducer->release_unit(unit + 1); // its backward is done
      reducer->gather_unit(unit);
      if (unit > 0) {
        reducer->prefetch_unit(unit - 1); // while this one's backward runs
      }
    });
  }
  reducer_->release_unit(unit);
}

} // namespace hotloop::train
