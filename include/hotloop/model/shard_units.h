#pragma once
// ZeRO stage 3's seam in a model (--shard 3): the units whose parameters
// are gathered from the ranks' shards just before the unit runs and freed
// after it (a transformer block, a ResNet stage), and the calls the model
// makes around each. A model without units (a TorchScript export) keeps
// every parameter whole.

#include <cstddef>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace hotloop::model {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // Unit `unit`'s parameters are whole when this returns.
  virtual void before(std::size_t unit) = 0;
  // The unit ran; `out` is its output (through which its backward starts).
  virtual void after(std::size_t unit, const at::Tensor& out) = 0;
};

class ShardUnits {
 public:
  virtual ~ShardUnits() = default;
  // The units, in the order forward runs them.
  virtual std::vector<std::shared_ptr<torch::nn::Module>> shard_units()
      const = 0;
  // The hooks forward calls around each unit; nullptr (the default): none.
  void set_unit_hooks(UnitHooks* hooks) {
    unit_hooks_ = hooks;
  }

 protected:
  // body() as unit `unit`, between the hooks.
  template <typename F>
  at::Tensor run_unit(std::size_t unit, F&& body) const {
    if (unit_hooks_ == nullptr) {
      return body();
    }
    unit_hooks_->before(unit);
    at::Tensor out = body();
    unit_hooks_->after(unit, out);
    return out;
  }

 private:
  UnitHooks* unit_hooks_ = nullptr;
};

} // namespace hotloop::model
