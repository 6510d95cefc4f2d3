#include "hotloop/train/loss.h"

#include <ATen/ops/cross_entropy_loss.h>

namespace hotloop::train {

at::Tensor classification_loss(
    const at::Tensor& logits,
    const at::Tensor& labels,
    double label_smoothing,
    at::Reduction::Reduction reduction) {
  // -100: no label is ignored (torch's default ignore_index).
  return at::cross_entropy_loss(
      logits.to(at::kFloat), labels, {}, reduction, -100, label_smoothing);
}

} // namespace hotloop::train
