#include "hotloop/train/optimizer.h"

#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

OptimizerKind parse_optimizer(const std::string& text) {
  return parse_named<OptimizerKind>(kOptimizerNames, text, "optimizer");
}

const char* to_string(OptimizerKind kind) {
  return name_of<OptimizerKind>(kOptimizerNames, kind);
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, OptimizerOptions options)
    : groups_(std::move(groups)), state_(groups_.size()), options_(options) {}

void Optimizer::zero_grad() {
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      p.mutable_grad() = at::Tensor();
    }
  }
  for (auto& params : device_params_) {
    for (auto& p : params) {
      p.mutable_grad() = at::Tensor();
    }
  }
}

void Optimizer::ensure_state() {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    auto& s = state_[g];
    const auto& params = groups_[g].params;
    auto zeros = [&](std::vector<at::Tensor>& buffers) {
      if (buffers.size() != params.size()) {
        buffers.clear();
        for (const auto& p : params) {
          buffers.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
        }
      }
    };
    if (options_.kind == OptimizerKind::Sgd) {
      if (options_.momentum != 0) {
        zeros(s.momentum);
      }
    } else {
      zeros(s.exp_avg);
      zeros(s.exp_avg_sq);
    }
  }
}

void Optimizer::step(double lr) {
  at::NoGradGuard no_grad;
  ensure_state();
  ++steps_;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (offloaded()) {
      gradients_to_host(g);
    }
    const double group_lr = lr * groups_[g].lr_scale;
    if (options_.kind == OptimizerKind::Sgd) {
      sgd_step(groups_[g], state_[g], group_lr);
    } else {
      adamw_step(groups_[g], state_[g], group_lr);
    }
    if (offloaded()) {
      parameters_to_device(g);
    }
  }
}

void Optimizer::offload_to_host() {
  if (offloaded() || steps_ > 0) {
    return;
  }
  at::NoGradGuard no_grad;
  for (ParamGroup& g : groups_) {
    device_params_.push_back(g.params);
    for (at::Tensor& p : g.params) {
      at::Tensor host = at::empty_strided(
          p.sizes(),
          p.strides(),
          p.options().device(at::kCPU).pinned_memory(p.is_cuda()));
      host.copy_(p);
      p = host;
    }
  }
}

void Optimizer::refresh_host_copies() {
  at::NoGradGuard no_grad;
  for (std::size_t g = 0; g < device_params_.size(); ++g) {
    for (std::size_t i = 0; i < device_params_[g].size(); ++i) {
      groups_[g].params[i].copy_(device_params_[g][i]);
    }
  }
}

// The device's gradients into the host copies' (the copy waits for them).
void Optimizer::gradients_to_host(std::size_t g) {
  auto& host = groups_[g].params;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const at::Tensor& d = device_params_[g][i].grad();
    if (!d.defined()) {
      host[i].mutable_grad() = at::Tensor();
      continue;
    }
    if (!host[i].grad().defined()) {
      host[i].mutable_grad() = at::empty_like(host[i]);
    }
    host[i].mutable_grad().copy_(d);
  }
}

// The updated host copies back into the parameters (from pinned memory:
// asynchronous on a GPU, in the order of the stream's later work).
void Optimizer::parameters_to_device(std::size_t g) {
  const auto& host = groups_[g].params;
  for (std::size_t i = 0; i < host.size(); ++i) {
    device_params_[g][i].copy_(host[i], /*non_blocking=*/true);
  }
}

namespace {

// The parameters that have a gradient, their gradients and the matching
// state buffers.
struct Active {
  std::vector<at::Tensor> params, grads, a, b;
};

Active active(
    const std::vector<at::Tensor>& params,
    const std::vector<at::Tensor>* a,
    const std::vector<at::Tensor>* b) {
  Active out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& grad = params[i].grad();
    if (!grad.defined()) {
      continue;
    }
    out.params.push_back(params[i]);
    out.grads.push_back(grad);
    if (a != nullptr && !a->empty()) {
      out.a.push_back((*a)[i]);
    }
    if (b != nullptr && !b->empty()) {
      out.b.push_back((*b)[i]);
    }
  }
  return out;
}

// SGD's direction (the step is -lr times it): the gradient plus weight
// decay, through the momentum buffers (advanced here), Nesterov or not.
std::vector<at::Tensor> sgd_direction(
    const Active& x,
    const OptimizerOptions& o) {
  std::vector<at::Tensor> update = x.grads;
  if (o.weight_decay != 0) {
    // grad + wd * param, without touching the gradient itself.
    update = at::_foreach_add(x.grads, x.params, o.weight_decay);
  }
  if (o.momentum != 0) {
    // buf = momentum * buf + update; torch.optim seeds buf with the first
    // update, which is the same as starting from zeros.
    at::_foreach_mul_(x.a, o.momentum);
    at::_foreach_add_(x.a, update);
    update = o.nesterov ? at::_foreach_add(update, x.a, o.momentum) : x.a;
  }
  return update;
}

// AdamW's moments: exp_avg moves toward the gradient, exp_avg_sq decays and
// takes in its square.
void adamw_moments(const Active& x, const OptimizerOptions& o) {
  at::_foreach_lerp_(x.a, x.grads, 1.0 - o.beta1);
  at::_foreach_mul_(x.b, o.beta2);
  at::_foreach_addcmul_(x.b, x.grads, x.grads, 1.0 - o.beta2);
}

} // namespace

OptimizerOptions Optimizer::group_options(const ParamGroup& group) const {
  OptimizerOptions o = options_;
  if (!group.decay) {
    o.weight_decay = 0;
  }
  return o;
}

void Optimizer::sgd_step(ParamGroup& group, GroupState& state, double lr) {
  const OptimizerOptions o = group_options(group);
  Active x = active(group.params, &state.momentum, nullptr);
  if (x.params.empty()) {
    return;
  }
  at::_foreach_add_(x.params, sgd_direction(x, o), -lr);
}

void Optimizer::adamw_step(ParamGroup& group, GroupState& state, double lr) {
  const OptimizerOptions o = group_options(group);
  Active x = active(group.params, &state.exp_avg, &state.exp_avg_sq);
  if (x.params.empty()) {
    return;
  }
  const double t = static_cast<double>(steps_);
  if (o.weight_decay != 0) {
    at::_foreach_mul_(x.params, 1.0 - lr * o.weight_decay);
  }
  adamw_moments(x, o);
  const double bias1 = 1.0 - std::pow(o.beta1, t);
  const double bias2 = 1.0 - std::pow(o.beta2, t);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(x.b);
  at::_foreach_div_(denom, std::sqrt(bias2));
  at::_foreach_add_(denom, o.eps);
  at::_foreach_addcdiv_(x.params, x.a, denom, -lr / bias1);
}

void Optimizer::set_device_scalars(double lr) {
  at::NoGradGuard no_grad;
  // Before any capture: state buffers must not come from a graph's pool.
  ensure_state();
  if (!lr_.defined()) {
    // float64: 1 - 0.999^t in float32 keeps 3 significant digits at t = 1.
    at::TensorOptions o = at::TensorOptions().dtype(at::kDouble);
    for (const auto& g : groups_) {
      if (!g.params.empty()) {
        o = o.device(g.params.front().device());
        break;
      }
    }
    lr_ = at::zeros({}, o);
    step_count_ = at::zeros({}, o);
  }
  lr_.fill_(lr);
  step_count_.fill_(static_cast<double>(steps_ + 1));
}

void Optimizer::step_on_device() {
  at::NoGradGuard no_grad;
  if (!lr_.defined()) {
    throw Error("Optimizer::step_on_device before set_device_scalars");
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (options_.kind == OptimizerKind::Sgd) {
      sgd_step_on_device(groups_[g], state_[g]);
    } else {
      adamw_step_on_device(groups_[g], state_[g]);
    }
  }
}

void Optimizer::sgd_step_on_device(ParamGroup& group, GroupState& state) {
  const OptimizerOptions o = group_options(group);
  Active x = active(group.params, &state.momentum, nullptr);
  if (x.params.empty()) {
    return;
  }
  const at::Tensor lr = (lr_ * group.lr_scale).to(at::kFloat);
  at::_foreach_sub_(x.params, at::_foreach_mul(sgd_direction(x, o), lr));
}

void Optimizer::adamw_step_on_device(ParamGroup& group, GroupState& state) {
  const OptimizerOptions o = group_options(group);
  Active x = active(group.params, &state.exp_avg, &state.exp_avg_sq);
  if (x.params.empty()) {
    return;
  }
  const at::Tensor lr = lr_ * group.lr_scale; // float64, like the scalars below
  if (o.weight_decay != 0) {
    at::_foreach_mul_(x.params, (1.0 - lr * o.weight_decay).to(at::kFloat));
  }
  adamw_moments(x, o);
  const at::Tensor bias1 = 1.0 - at::pow(o.beta1, step_count_);
  const at::Tensor bias2 = 1.0 - at::pow(o.beta2, step_count_);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(x.b);
  at::_foreach_div_(denom, bias2.sqrt().to(at::kFloat));
  at::_foreach_add_(denom, o.eps);
  std::vector<at::Tensor> move = at::_foreach_div(x.a, denom);
  at::_foreach_mul_(move, (lr / bias1).to(at::kFloat));
  at::_foreach_sub_(x.params, move);
}

std::vector<std::pair<std::string, at::Tensor>> Optimizer::state() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("steps", at::scalar_tensor(steps_, at::kLong));
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    auto add = [&](const char* what, const std::vector<at::Tensor>& buffers) {
      for (std::size_t i = 0; i < buffers.size(); ++i) {
        out.emplace_back(
            fmt::format("{}.{}.{}", groups_[g].name, i, what), buffers[i]);
      }
    };
    add("momentum", state_[g].momentum);
    add("exp_avg", state_[g].exp_avg);
    add("exp_avg_sq", state_[g].exp_avg_sq);
  }
  return out;
}

void Optimizer::load_state(
    const std::vector<std::pair<std::string, at::Tensor>>& state) {
  at::NoGradGuard no_grad;
  if (!state.empty()) {
    ensure_state();
  }
  for (const auto& [name, t] : state) {
    if (name == "steps") {
      steps_ = t.item<std::int64_t>();
      continue;
    }
    bool found = false;
    for (std::size_t g = 0; g < groups_.size() && !found; ++g) {
      auto try_load = [&](const char* what, std::vector<at::Tensor>& buffers) {
        for (std::size_t i = 0; i < buffers.size() && !found; ++i) {
          if (name == fmt::format("{}.{}.{}", groups_[g].name, i, what)) {
            if (buffers[i].sizes() != t.sizes()) {
              throw DataError(fmt::format(
                  "optimizer state {}: shape differs from the parameter's",
                  name));
            }
            buffers[i].copy_(t);
            found = true;
          }
        }
      };
      try_load("momentum", state_[g].momentum);
      try_load("exp_avg", state_[g].exp_avg);
      try_load("exp_avg_sq", state_[g].exp_avg_sq);
    }
    if (!found) {
      throw DataError(
          fmt::format("optimizer state {} matches no parameter", name),
          "the checkpoint was written with another model, optimizer or --freeze setting");
    }
  }
}

} // namespace hotloop::train
