#pragma once
// The training objective, written once: cross-entropy over the logits in
// float32 (autocast leaves them bf16/fp16), with optional label smoothing.
// The eager and the graphed step, evaluation and smoke's ladder all call it.

#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>

namespace hotloop::train {

// (B, K) logits, (B,) int64 labels -> the loss (0-dim float32): the mean over
// the batch, or the sum with `reduction` Sum (evaluation adds batches up).
// A language model's (B, T, V) logits and (B, T) next tokens: next-token
// cross-entropy, the mean (or sum) over all B x T positions.
at::Tensor classification_loss(
    const at::Tensor& logits,
    const at::Tensor& labels,
    double label_smoothing = 0,
    at::Reduction::Reduction reduction = at::Reduction::Mean);

} // namespace hotloop::train
