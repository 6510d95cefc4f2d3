#pragma once
// SGD (momentum, Nesterov, weight decay) and AdamW over parameter groups, on
// ATen's multi-tensor (_foreach_) kernels: one launch per operation for all of
// a group's parameters instead of one per parameter. The math is
// torch.optim's (SGD with dampening 0; AdamW with decoupled weight decay and
// bias correction), so a step here equals a step there (tested).

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/train/options.h"

namespace hotloop::train {

struct ParamGroup {
  std::string name; // "backbone", "head", "all": for messages and state names
  std::vector<at::Tensor> params; // trainable only
  double lr_scale = 1.0; // this group's LR = schedule LR * lr_scale
  bool decay = true; // weight decay applies (false: biases, norms, ...)
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, OptimizerOptions options);

  // One update with the learning rate `lr` (times each group's scale).
  // Parameters without a gradient are left alone.
  void step(double lr);
  // Sets every gradient to None (frees the memory until the next backward).
  void zero_grad();

  // ZeRO-Offload (--offload optimizer): the update runs on the host, on
  // float32 copies of the parameters (pinned where they live on a GPU), and
  // the state lives there too, so the device holds none of it. Each step
  // copies the gradients to the host, updates the copies there and copies
  // them back into the parameters. Call before the first step.
  void offload_to_host();
  bool offloaded() const {
    return !device_params_.empty();
  }
  // Offloaded: the host copies taken again from the parameters, which
  // were written since (a checkpoint loaded); otherwise nothing.
  void refresh_host_copies();

  // The same update for CUDA graphs: the learning rate and the step count
  // (AdamW's bias correction) come from 0-dim tensors on the parameters'
  // device, so that one capture serves every step. set_device_scalars(lr)
  // fills them for the coming step (a kernel launch, no synchronization);
  // step_on_device() is the part that may be captured; count_device_step()
  // counts the step once it has run (eagerly or as a replay).
  void set_device_scalars(double lr);
  void step_on_device();
  void count_device_step() {
    ++steps_;
  }

  const std::vector<ParamGroup>& groups() const {
    return groups_;
  }
  const OptimizerOptions& options() const {
    return options_;
  }
  std::int64_t steps() const {
    return steps_;
  }
  // Momentum / moment buffers as named tensors ("group.index.exp_avg", ...)
  // plus the step count, for checkpoints; load_state restores them exactly.
  std::vector<std::pair<std::string, at::Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state);

 private:
  struct GroupState {
    std::vector<at::Tensor> momentum; // SGD
    std::vector<at::Tensor> exp_avg; // AdamW
    std::vector<at::Tensor> exp_avg_sq; // AdamW
  };
  void ensure_state();
  void gradients_to_host(std::size_t g);
  void parameters_to_device(std::size_t g);
  // The options with the group's exceptions (no weight decay).
  OptimizerOptions group_options(const ParamGroup& group) const;
  void sgd_step(ParamGroup& group, GroupState& state, double lr);
  void adamw_step(ParamGroup& group, GroupState& state, double lr);
  void sgd_step_on_device(ParamGroup& group, GroupState& state);
  void adamw_step_on_device(ParamGroup& group, GroupState& state);

  std::vector<ParamGroup> groups_;
  // Offloaded: the parameters on their device, per group (groups_ then
  // holds their host copies).
  std::vector<std::vector<at::Tensor>> device_params_;
  std::vector<GroupState> state_;
  OptimizerOptions options_;
  std::int64_t steps_ = 0;
  at::Tensor lr_; // step_on_device: 0-dim float64 on the parameters' device
  at::Tensor step_count_; // step_on_device: AdamW's t, the same
};

} // namespace hotloop::train
