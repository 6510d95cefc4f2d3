#include "hotloop/model/batch_norm.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/full.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/rsqrt.h>
#include <torch/csrc/autograd/custom_function.h>

namespace hotloop::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Sum over ranks whose backward is the same sum of the gradient: every
// rank's loss depends on every rank's statistics.
class SumOverRanks : public torch::autograd::Function<SumOverRanks> {
 public:
  static at::Tensor forward(
      AutogradContext* ctx,
      const at::Tensor& local,
      const AllReduceSum* sum) {
    ctx->saved_data["sum"] = reinterpret_cast<std::int64_t>(sum);
    at::Tensor total = local.clone();
    (*sum)(total);
    return total;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* sum =
        reinterpret_cast<const AllReduceSum*>(ctx->saved_data["sum"].toInt());
    at::Tensor g = grads[0].contiguous().clone();
    (*sum)(g);
    return {g, at::Tensor()};
  }
};

} // namespace

at::Tensor BatchNorm2dImpl::forward(const at::Tensor& input) {
  if (sync_ && is_training()) {
    return synchronized_forward(input);
  }
  return torch::nn::BatchNorm2dImpl::forward(input);
}

at::Tensor BatchNorm2dImpl::synchronized_forward(const at::Tensor& input) {
  TORCH_CHECK(
      input.dim() == 4,
      "BatchNorm2d: expected a 4-D input (N, C, H, W), got ",
      input.dim(),
      "-D");
  const std::int64_t c = input.size(1);
  const std::vector<std::int64_t> per_channel = {1, c, 1, 1};
  const at::Tensor x = input.to(at::kFloat);
  const at::Tensor shift = running_mean.defined()
      ? running_mean.detach().to(at::kFloat)
      : at::Tensor();
  const at::Tensor xs = shift.defined() ? x - shift.view(per_channel) : x;
  const double local_count = static_cast<double>(x.numel() / c);
  const at::Tensor local = at::cat(
      {xs.sum({0, 2, 3}),
       (xs * xs).sum({0, 2, 3}),
       at::full({1}, local_count, x.options())});
  const at::Tensor total = SumOverRanks::apply(local, &sync_);
  const at::Tensor count = total.narrow(0, 2 * c, 1);
  const at::Tensor mean_shifted = total.narrow(0, 0, c) / count;
  const at::Tensor var =
      total.narrow(0, c, c) / count - mean_shifted * mean_shifted; // biased
  const at::Tensor mean = shift.defined() ? mean_shifted + shift : mean_shifted;
  if (options.track_running_stats()) {
    // On the device, without reading anything back: the global count and
    // the cumulative average's momentum stay tensors.
    at::NoGradGuard no_grad;
    num_batches_tracked += 1;
    const at::Tensor n = count.detach();
    const at::Tensor unbiased =
        var.detach() * (n / at::clamp_min(n - 1, 1.0)); // n / max(n - 1, 1)
    if (options.momentum().has_value()) {
      const double momentum = *options.momentum();
      running_mean.mul_(1 - momentum).add_(mean.detach(), momentum);
      running_var.mul_(1 - momentum).add_(unbiased, momentum);
    } else {
      const at::Tensor m =
          at::reciprocal(num_batches_tracked.to(at::kFloat)); // 1 / batches
      running_mean.mul_(1 - m).add_(mean.detach() * m);
      running_var.mul_(1 - m).add_(unbiased * m);
    }
  }
  at::Tensor y = (x - mean.view(per_channel)) *
      at::rsqrt(var + options.eps()).view(per_channel);
  if (options.affine()) {
    y = y * weight.view(per_channel) + bias.view(per_channel);
  }
  return y.to(input.scalar_type());
}

int synchronize_batch_norm(torch::nn::Module& module, const AllReduceSum& sum) {
  int n = 0;
  for (const auto& m : module.modules()) {
    if (auto* bn = dynamic_cast<BatchNorm2dImpl*>(m.get())) {
      bn->set_sync(sum);
      ++n;
    }
  }
  return n;
}

} // namespace hotloop::model
