#include "hotloop/model/lm/linear_cross_entropy.h"

#include <algorithm>

#include <ATen/TensorOperators.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"

namespace hotloop::model::lm {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr std::int64_t kChunkElements = std::int64_t{1} << 26;

// The dtype the products run in: autocast's where it is on for the
// device (as at::linear would be cast), else the weight's.
at::ScalarType compute_dtype(const at::Tensor& hidden, const at::Tensor& w) {
  const c10::DeviceType type = hidden.device().type();
  if (at::autocast::is_autocast_enabled(type)) {
    return at::autocast::get_autocast_dtype(type);
  }
  return w.scalar_type();
}

void check_shapes(
    const at::Tensor& hidden,
    const at::Tensor& weight,
    const at::Tensor& targets) {
  if (hidden.dim() != 2 || weight.dim() != 2 || targets.dim() != 1 ||
      hidden.size(1) != weight.size(1) || targets.size(0) != hidden.size(0)) {
    throw Error(fmt::format(
        "linear cross-entropy: hidden {}, weight {} and targets {} do not fit; expected (N, C), (V, C) and (N)",
        hidden.sizes(),
        weight.sizes(),
        targets.sizes()));
  }
}

// One chunk: its rows of hidden and targets, the products' operands in the
// compute dtype, and which targets count.
struct Chunk {
  at::Tensor hidden; // (n, C), compute dtype
  at::Tensor targets; // (n), data::kNoTarget replaced by 0 (gather's index)
  at::Tensor counted; // (n) float32: 1 where the target counts
};

Chunk chunk_at(
    const at::Tensor& hidden,
    const at::Tensor& targets,
    std::int64_t start,
    std::int64_t n,
    at::ScalarType dtype) {
  const at::Tensor t = targets.narrow(0, start, n);
  const at::Tensor counted = t.ne(data::kNoTarget);
  return {
      hidden.narrow(0, start, n).to(dtype),
      t.masked_fill(counted.logical_not(), 0),
      counted.to(at::kFloat)};
}

// Per token: the cross-entropy of float32 logits against the target, with
// label smoothing; and the log-sum-exp it used.
std::pair<at::Tensor, at::Tensor> token_losses(
    const at::Tensor& logits,
    const Chunk& c,
    double smoothing) {
  const at::Tensor lse = at::logsumexp(logits, {1});
  const at::Tensor target_logit =
      logits.gather(1, c.targets.unsqueeze(1)).squeeze(1);
  at::Tensor loss = lse - target_logit;
  if (smoothing > 0) {
    // -(1/V) Σ log p: the log-sum-exp less the mean logit.
    loss = (1 - smoothing) * loss + smoothing * (lse - logits.mean({1}));
  }
  return {loss * c.counted, lse};
}

// The gradient of the chunk's summed loss with respect to its logits, in
// place of them: softmax - (1 - ε) one-hot - ε / V, zero on rows whose
// target does not count.
at::Tensor logits_gradient(
    at::Tensor logits,
    const at::Tensor& lse,
    const Chunk& c,
    double smoothing) {
  at::Tensor g = logits.sub_(lse.unsqueeze(1)).exp_();
  if (smoothing > 0) {
    g.sub_(smoothing / static_cast<double>(g.size(1)));
  }
  g.scatter_add_(
      1, c.targets.unsqueeze(1), (c.counted * -(1 - smoothing)).unsqueeze(1));
  return g.mul_(c.counted.unsqueeze(1));
}

class LinearCrossEntropyFunction
    : public torch::autograd::Function<LinearCrossEntropyFunction> {
 public:
  // The summed loss over counted targets; with `want_hidden` /
  // `want_weight`, the gradients of that sum kept for backward.
  static at::Tensor forward(
      AutogradContext* ctx,
      const at::Tensor& hidden,
      const at::Tensor& weight,
      const at::Tensor& targets,
      double smoothing,
      std::int64_t chunk,
      bool want_hidden,
      bool want_weight) {
    const at::ScalarType dtype = compute_dtype(hidden, weight);
    const at::Tensor w = weight.to(dtype);
    const std::int64_t n = hidden.size(0);
    at::Tensor sum = at::zeros({}, hidden.options().dtype(at::kFloat));
    at::Tensor grad_hidden = want_hidden
        ? at::empty(hidden.sizes(), hidden.options().dtype(at::kFloat))
        : at::Tensor();
    at::Tensor grad_weight = want_weight
        ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat))
        : at::Tensor();
    for (std::int64_t start = 0; start < n; start += chunk) {
      const std::int64_t rows = std::min(chunk, n - start);
      const Chunk c = chunk_at(hidden, targets, start, rows, dtype);
      at::Tensor logits = at::mm(c.hidden, w.t()).to(at::kFloat);
      const auto [loss, lse] = token_losses(logits, c, smoothing);
      sum.add_(loss.sum());
      if (!want_hidden && !want_weight) {
        continue;
      }
      const at::Tensor g32 =
          logits_gradient(std::move(logits), lse, c, smoothing);
      const at::Tensor g = g32.to(dtype);
      if (want_hidden) {
        grad_hidden.narrow(0, start, rows).copy_(at::mm(g, w));
      }
      if (want_weight) {
        if (dtype == at::kFloat) {
          grad_weight.addmm_(g.t(), c.hidden);
        } else if (dtype == at::kHalf) {
          // A sum over the chunk's tokens, unscaled: past fp16's 65504
          // for a token many targets name (a byte vocabulary's chunk is
          // 262,144 tokens). float32 holds it.
          grad_weight.addmm_(g32.t(), c.hidden.to(at::kFloat));
        } else {
          grad_weight.add_(at::mm(g.t(), c.hidden));
        }
      }
    }
    ctx->save_for_backward({grad_hidden, grad_weight});
    ctx->saved_data["hidden_dtype"] =
        static_cast<std::int64_t>(hidden.scalar_type());
    ctx->saved_data["weight_dtype"] =
        static_cast<std::int64_t>(weight.scalar_type());
    return sum;
  }

  static variable_list backward(
      AutogradContext* ctx,
      variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_outputs[0]; // 0-dim: d(result)/d(sum)
    auto scaled = [&](const at::Tensor& grad, const char* dtype_key) {
      if (!grad.defined()) {
        return at::Tensor();
      }
      const auto dtype =
          static_cast<at::ScalarType>(ctx->saved_data[dtype_key].toInt());
      return (grad * g).to(dtype);
    };
    return {
        scaled(saved[0], "hidden_dtype"),
        scaled(saved[1], "weight_dtype"),
        at::Tensor(),
        at::Tensor(),
        at::Tensor(),
        at::Tensor(),
        at::Tensor()};
  }
};

} // namespace

std::int64_t chunk_tokens(
    std::int64_t vocab,
    const LinearCrossEntropyOptions& options) {
  if (options.chunk_tokens > 0) {
    return options.chunk_tokens;
  }
  return std::max<std::int64_t>(
      kChunkElements / std::max<std::int64_t>(vocab, 1), 1);
}

at::Tensor linear_cross_entropy(
    const at::Tensor& hidden,
    const at::Tensor& weight,
    const at::Tensor& targets,
    const LinearCrossEntropyOptions& options) {
  check_shapes(hidden, weight, targets);
  const bool grad = at::GradMode::is_enabled();
  const at::Tensor sum = LinearCrossEntropyFunction::apply(
      hidden,
      weight,
      targets,
      options.loss.label_smoothing,
      chunk_tokens(weight.size(0), options),
      grad && hidden.requires_grad(),
      grad && weight.requires_grad());
  if (options.loss.reduction == at::Reduction::Sum) {
    return sum;
  }
  // The mean over the counted targets; 0 (and no gradient) when none counts
  // (torch's would be NaN): a micro-batch without targets adds nothing.
  return sum / targets.ne(data::kNoTarget).sum().clamp_min(1).to(at::kFloat);
}

LinearCrossEntropySums linear_cross_entropy_sums(
    const at::Tensor& hidden,
    const at::Tensor& weight,
    const at::Tensor& targets,
    const LinearCrossEntropyOptions& options) {
  check_shapes(hidden, weight, targets);
  const at::NoGradGuard no_grad;
  const at::ScalarType dtype = compute_dtype(hidden, weight);
  const at::Tensor w = weight.to(dtype);
  const std::int64_t n = hidden.size(0);
  const std::int64_t chunk = chunk_tokens(weight.size(0), options);
  at::Tensor loss = at::zeros({}, hidden.options().dtype(at::kDouble));
  at::Tensor correct = at::zeros({}, hidden.options().dtype(at::kLong));
  for (std::int64_t start = 0; start < n; start += chunk) {
    const std::int64_t rows = std::min(chunk, n - start);
    const Chunk c = chunk_at(hidden, targets, start, rows, dtype);
    const at::Tensor logits = at::mm(c.hidden, w.t()).to(at::kFloat);
    loss.add_(token_losses(logits, c, options.loss.label_smoothing)
                  .first.sum()
                  .to(at::kDouble));
    correct.add_(
        (at::argmax(logits, 1).eq(c.targets) * c.counted.to(at::kBool)).sum());
  }
  return {loss, correct};
}

} // namespace hotloop::model::lm
