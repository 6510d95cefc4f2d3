#pragma once
// A language model's output layer and its loss as one step, a chunk of
// tokens at a time, so that the (tokens x vocabulary) logits never exist
// whole: at Qwen2.5's vocabulary of 151,936, 16k tokens of float32 logits
// are ~10 GB, and as much again for their gradient.
//
// Each chunk's logits are hidden · weightᵀ (in autocast's dtype where it is
// on, as the unchunked layer would be), their loss is taken in float32, and
// when gradients are wanted the chunk's gradients with respect to `hidden`
// and `weight` are computed right there from its softmax, before the next
// chunk (as Liger's fused linear cross-entropy does): the same three matrix
// products as the unchunked layer and loss, none recomputed. They are kept
// (float32: hidden's size and weight's) until backward, which scales them by
// the incoming gradient (a loss scale included). The chunk's gradient is
// taken before the division by the number of targets: the product for
// `hidden` stays within [-2, 2] x the weight's largest entry, while the
// weight's is a sum over the chunk's tokens, so under fp16 that one product
// runs in float32 (its sum could pass fp16's 65504, where no loss scale
// would help). A mean over no counted target is 0, not torch's NaN: a
// micro-batch without targets adds nothing.
//
// Equal to at::linear followed by cross-entropy (ignore index -100, label
// smoothing, mean over the counted targets or their sum) within float32
// rounding: tests/model/test_linear_cross_entropy.cpp.

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "hotloop/model/loss.h"

namespace hotloop::model::lm {

struct LinearCrossEntropyOptions {
  LossOptions loss; // label smoothing; mean over counted targets, or sum
  // Tokens per chunk; 0: as many as keep a chunk's logits at 2^26 elements
  // (256 MiB of float32), at least one.
  std::int64_t chunk_tokens = 0;
};

// hidden (N, C), weight (V, C), targets (N) int64 with -100 for none -> a
// 0-dim float32 loss, differentiable in hidden and weight.
at::Tensor linear_cross_entropy(
    const at::Tensor& hidden,
    const at::Tensor& weight,
    const at::Tensor& targets,
    const LinearCrossEntropyOptions& options = {});

// Evaluation's figures the same way, without gradients: the summed loss
// (float64) and how many counted targets are the argmax of their logits
// (int64), both 0-dim on hidden's device.
struct LinearCrossEntropySums {
  at::Tensor loss_sum;
  at::Tensor correct;
};
LinearCrossEntropySums linear_cross_entropy_sums(
    const at::Tensor& hidden,
    const at::Tensor& weight,
    const at::Tensor& targets,
    const LinearCrossEntropyOptions& options = {});

// The tokens a chunk takes for a vocabulary of `vocab` under `options`.
std::int64_t chunk_tokens(
    std::int64_t vocab,
    const LinearCrossEntropyOptions& options);

} // namespace hotloop::model::lm
