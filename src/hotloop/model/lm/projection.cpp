#include "projection.h"

#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/zeros.h>

namespace hotloop::model::lm {

ProjectionImpl::ProjectionImpl(
    std::int64_t in,
    std::int64_t out,
    bool with_bias,
    WeightLayout layout)
    : in_(in), out_(out), layout_(layout) {
  weight = register_parameter(
      "weight",
      layout == WeightLayout::OutIn ? at::empty({out, in})
                                    : at::empty({in, out}));
  if (with_bias) {
    bias = register_parameter("bias", at::zeros({out}));
  }
}

at::Tensor ProjectionImpl::forward(const at::Tensor& x) {
  const at::Tensor w = layout_ == WeightLayout::OutIn ? weight : weight.t();
  at::Tensor y = at::linear(x, w, bias);
  if (lora_a_.defined()) {
    const at::Tensor in =
        dropout_ > 0 && is_training() ? at::dropout(x, dropout_, true) : x;
    y = y + at::linear(at::linear(in, lora_a_), lora_b_) * scale_;
  }
  return y;
}

void ProjectionImpl::add_lora(std::int64_t rank, double scale, double dropout) {
  const auto options = weight.options().dtype(at::kFloat);
  auto holder = [&](const char* name, at::Tensor t) {
    auto m = std::make_shared<torch::nn::Module>();
    at::Tensor p = m->register_parameter("weight", std::move(t));
    register_module(name, m);
    return p;
  };
  at::Tensor a = at::empty({rank, in_}, options);
  {
    at::NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_));
    a.uniform_(-bound, bound);
  }
  lora_a_ = holder("lora_A", std::move(a));
  lora_b_ = holder("lora_B", at::zeros({out_, rank}, options));
  scale_ = scale;
  dropout_ = dropout;
}

void ProjectionImpl::merge_lora() {
  if (!lora_a_.defined()) {
    return;
  }
  at::NoGradGuard no_grad;
  const at::Tensor delta =
      at::linear(lora_b_.to(at::kFloat), lora_a_.to(at::kFloat).t()) * scale_;
  const at::Tensor merged = weight.to(at::kFloat) +
      (layout_ == WeightLayout::OutIn ? delta : delta.t());
  weight.copy_(merged);
  unregister_module("lora_A");
  unregister_module("lora_B");
  lora_a_ = at::Tensor();
  lora_b_ = at::Tensor();
}

} // namespace hotloop::model::lm
