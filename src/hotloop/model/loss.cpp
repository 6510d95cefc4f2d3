#include "hotloop/model/loss.h"

#include <ATen/ops/cross_entropy_loss.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

at::Tensor cross_entropy_loss(
    const at::Tensor& logits,
    const at::Tensor& labels,
    const LossOptions& options) {
  if (logits.dim() != 2) {
    throw Error(
        fmt::format(
            "cross-entropy: the model's output has {} dimensions; class logits are (batch, classes)",
            logits.dim()),
        "a model whose forward() gives another shape overrides Model::loss (a language model's (B, T, V): next_token_loss)");
  }
  // -100: no label is ignored (torch's default ignore_index).
  return at::cross_entropy_loss(
      logits.to(at::kFloat),
      labels,
      {},
      options.reduction,
      -100,
      options.label_smoothing);
}

at::Tensor next_token_loss(
    const at::Tensor& logits,
    const at::Tensor& targets,
    const LossOptions& options) {
  if (logits.dim() != 3) {
    throw Error(fmt::format(
        "next-token loss: the model's output has {} dimensions; expected (batch, tokens, vocabulary)",
        logits.dim()));
  }
  return cross_entropy_loss(
      logits.reshape({-1, logits.size(2)}), targets.reshape({-1}), options);
}

} // namespace hotloop::model
