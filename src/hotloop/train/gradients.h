#pragma once
// What a step does with the gradients besides applying them: scaling them,
// clipping their global norm on the device, and the first step's check that
// everything the step touched is on the training device.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/data/loader.h"
#include "hotloop/train/run_state.h"

namespace hotloop::train {

using NamedParams = std::vector<std::pair<std::string, at::Tensor>>;

// Multiplies the gradients of `params` by `factor` in place, on the device
// (one multi-tensor kernel).
void scale_gradients(const NamedParams& params, double factor);

// Scales the gradients of `params` to a global norm of at most `max_norm` on
// the device, without a synchronization (as torch's foreach clip_grad_norm_
// does); returns the norm before clipping (0-dim float32 on the device), or
// `none` when no parameter has a gradient. `sum_over_ranks` (ZeRO: each
// rank holds a shard of the gradients): sums the squared norm over the ranks
// in place, so that every rank clips by the global norm.
at::Tensor clip_gradients(
    const NamedParams& params,
    double max_norm,
    const at::Tensor& none,
    const std::function<void(at::Tensor&)>& sum_over_ranks = {});

// Clamps each gradient element of `params` to [-limit, limit] in place (as
// torch.nn.utils.clip_grad_value_), on the device.
void clip_gradient_values(const NamedParams& params, double limit);

// Every parameter, gradient, buffer and optimizer state of the run, and the
// batch, must be on s.device, and the parameters float32 master weights;
// else Error naming the first one that is not (a model or batch left on the
// CPU trains there silently).
void check_devices(const RunState& s, const data::Batch& batch);

} // namespace hotloop::train
