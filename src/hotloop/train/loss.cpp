#include "hotloop/train/loss.h"

#include <ATen/ops/cross_entropy_loss.h>

namespace hotloop::train {

at::Tensor classification_loss(
    const at::Tensor& logits,
    const at::Tensor& labels,
    double label_smoothing,
    at::Reduction::Reduction reduction) {
  // -100: no label is ignored (torch's default ignore_index).
  if (logits.dim() == 3) {
    // A language model's (B, T, V) next-token logits and (B, T) targets:
    // every position is a sample.
    return at::cross_entropy_loss(
        logits.reshape({-1, logits.size(2)}).to(at::kFloat),
        labels.reshape({-1}),
        {},
        reduction,
        -100,
        label_smoothing);
  }
  return at::cross_entropy_loss(
      logits.to(at::kFloat), labels, {}, reduction, -100, label_smoothing);
}

} // namespace hotloop::train
