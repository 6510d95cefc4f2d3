#include "hotloop/train/gradients.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/_foreach_clamp_max.h>
#include <ATen/ops/_foreach_clamp_min.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/train/optimizer.h"

namespace hotloop::train {

namespace {

std::vector<at::Tensor> gradients_of(const NamedParams& params) {
  std::vector<at::Tensor> grads;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) {
      grads.push_back(p.grad());
    }
  }
  return grads;
}

} // namespace

void scale_gradients(const NamedParams& params, double factor) {
  std::vector<at::Tensor> grads = gradients_of(params);
  if (!grads.empty()) {
    at::_foreach_mul_(grads, factor);
  }
}

at::Tensor clip_gradients(
    const NamedParams& params,
    double max_norm,
    const at::Tensor& none,
    const std::function<void(at::Tensor&)>& sum_over_ranks) {
  std::vector<at::Tensor> grads = gradients_of(params);
  at::Tensor total;
  if (sum_over_ranks) {
    // A shard is a whole bucket of parameters: its norm is taken over
    // pieces of 64 Ki elements (a float32 accumulation over millions of
    // elements drifts: 3e-4 relative on resnet18-small's 11M), the pieces'
    // squares summed in float64 and over the ranks (every rank joins, with
    // or without gradients of its own).
    std::vector<at::Tensor> pieces;
    for (const at::Tensor& g : grads) {
      for (at::Tensor& piece : g.reshape({-1}).split(1 << 16)) {
        pieces.push_back(std::move(piece));
      }
    }
    at::Tensor squared = pieces.empty()
        ? at::zeros({1}, none.options().dtype(at::kDouble))
        : at::stack(at::_foreach_norm(pieces))
              .to(at::kDouble)
              .square()
              .sum()
              .reshape({1});
    sum_over_ranks(squared);
    total = squared.sqrt().to(at::kFloat).reshape({});
  } else if (grads.empty()) {
    return none;
  } else {
    total = at::stack(at::_foreach_norm(grads)).norm().to(at::kFloat);
  }
  if (grads.empty()) {
    return total;
  }
  const at::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coef);
  return total;
}

void clip_gradient_values(const NamedParams& params, double limit) {
  std::vector<at::Tensor> grads = gradients_of(params);
  if (!grads.empty()) {
    at::_foreach_clamp_min_(grads, -limit);
    at::_foreach_clamp_max_(grads, limit);
  }
}

void check_devices(const RunState& s, const data::Batch& batch) {
  auto expect = [&](const std::string& what, const at::Tensor& t) {
    if (t.defined() && t.device() != s.device) {
      throw Error(
          fmt::format(
              "{} is on {} but training runs on {}",
              what,
              t.device().str(),
              s.device.str()),
          "every tensor must be moved with the model (model->to(device)); a model or batch left on the CPU trains there silently");
    }
  };
  for (const auto& p : s.model->named_parameters()) {
    expect("parameter " + p.key(), p.value());
    expect("gradient of " + p.key(), p.value().grad());
  }
  // What the optimizer updates: the model's trainable parameters (frozen
  // ones may be stored narrower: LoRA's bf16 base), or their shards (at
  // ZeRO stage 3 in mixed precision a block's are bf16 compute copies).
  for (const ParamGroup& g : s.optimizer->groups()) {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (g.params[i].scalar_type() != at::kFloat) {
        throw Error(fmt::format(
            "the optimizer's parameter {} of group {} is {}, expected float32 master weights",
            i,
            g.name,
            c10::toString(g.params[i].scalar_type())));
      }
    }
  }
  for (const auto& b : s.model->named_buffers()) {
    expect("buffer " + b.key(), b.value());
  }
  for (const auto& [name, t] : s.optimizer->state()) {
    if (name != "steps" && !s.optimizer->offloaded()) {
      expect("optimizer state " + name, t);
    }
  }
  expect("the input batch", batch.images);
  expect("the labels", batch.labels);
}

} // namespace hotloop::train
