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
    // Every rank joins the sum, with or without gradients of its own.
    at::Tensor squared = grads.empty() ? at::zeros({1}, none.options())
                                       : at::stack(at::_foreach_norm(grads))
                                             .to(at::kFloat)
                                             .square()
                                             .sum()
                                             .reshape({1});
    sum_over_ranks(squared);
    total = squared.sqrt().reshape({});
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
    // Frozen weights may be stored narrower (LoRA's bf16 base).
    if (p.value().requires_grad() && p.value().scalar_type() != at::kFloat) {
      throw Error(fmt::format(
          "parameter {} is {}, expected float32 master weights",
          p.key(),
          c10::toString(p.value().scalar_type())));
    }
  }
  for (const auto& b : s.model->named_buffers()) {
    expect("buffer " + b.key(), b.value());
  }
  for (const auto& [name, t] : s.optimizer->state()) {
    if (name != "steps") {
      expect("optimizer state " + name, t);
    }
  }
  expect("the input batch", batch.images);
  expect("the labels", batch.labels);
}

} // namespace hotloop::train
