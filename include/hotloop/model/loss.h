#pragma once
// The training objectives a model chooses among (Model::loss): cross-entropy
// over class logits, and next-token cross-entropy for language models. Both
// compute in float32 (autocast leaves logits bf16/fp16). A model with an
// objective of its own overrides Model::loss and may build on these.

#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>

namespace hotloop::model {

struct LossOptions {
  double label_smoothing = 0; // the run's --label-smoothing
  // Mean over the samples (training), or their sum (evaluation adds
  // batches up and divides once).
  at::Reduction::Reduction reduction = at::Reduction::Mean;
};

// (B, K) logits and (B,) int64 labels -> a 0-dim float32 loss. Error for
// logits of another rank (a model whose output is not (B, K) overrides
// Model::loss).
at::Tensor cross_entropy_loss(
    const at::Tensor& logits,
    const at::Tensor& labels,
    const LossOptions& options = {});

// (B, T, V) next-token logits and (B, T) targets -> a 0-dim float32 loss:
// every one of the B x T positions is a sample.
at::Tensor next_token_loss(
    const at::Tensor& logits,
    const at::Tensor& targets,
    const LossOptions& options = {});

} // namespace hotloop::model
