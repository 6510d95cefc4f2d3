#pragma once
// What the gradient reducers' tests give each rank: three leaf parameters
// (10, 5x6 and 3 elements), rank r's gradients of them ((r + 1) x [0, 1,
// ...] for the first two, r for the third: means 1.5x and 0.5 over two
// ranks), and a loss whose gradients those are.

#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

namespace hotloop::test {

inline std::vector<at::Tensor> make_params() {
  return {
      at::zeros({10}).requires_grad_(),
      at::zeros({5, 6}).requires_grad_(),
      at::zeros({3}).requires_grad_()};
}

inline std::vector<at::Tensor> rank_grads(int r) {
  return {
      at::arange(10, at::kFloat) * (r + 1),
      at::arange(30, at::kFloat).reshape({5, 6}) * (r + 1),
      at::full({3}, static_cast<float>(r))};
}

// A loss whose gradient with respect to params[i] is `scale` * grads[i].
inline at::Tensor loss_for(
    const std::vector<at::Tensor>& params,
    const std::vector<at::Tensor>& grads,
    double scale) {
  at::Tensor loss = (params[0] * grads[0]).sum() * scale;
  for (std::size_t i = 1; i < params.size(); ++i) {
    loss = loss + (params[i] * grads[i]).sum() * scale;
  }
  return loss;
}

} // namespace hotloop::test
