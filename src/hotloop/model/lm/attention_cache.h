#pragma once
// What GPT's and the Llama family's attention share: the checks on a forward's
// token ids and the KV cache's bookkeeping, so both keep one rule for where a
// new position's keys go and which keys it sees.

#include <cstddef>
#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/model_batch.h"

namespace hotloop::model::lm {

// UsageError unless `tokens` is (B, T) with T <= context (`model` names the
// model in the message).
void check_tokens(
    const at::Tensor& tokens,
    std::int64_t context,
    const char* model);

// UsageError unless `rows` is empty or its positions are (B, T) as
// `tokens` is.
void check_rows(
    const PackedRows& rows,
    const at::Tensor& tokens,
    const char* model);

// UsageError unless `cache` was made for `layers` layers and this batch, and
// T more positions fit in `context`.
void check_cache(
    const KvCache& cache,
    const at::Tensor& tokens,
    std::int64_t layers,
    std::int64_t context,
    const char* model);

// Keys and values for SDPA, and its causal flag and mask.
struct AttentionInputs {
  at::Tensor keys;
  at::Tensor values;
  bool causal = true;
  std::optional<at::Tensor> mask;
};

// Without a cache: k and v as they are, causal. With one: k and v (B, H, T,
// D) written at positions cache->length .. of layer `layer` (its tensors
// remade in k's dtype when that differs), and all positions so far returned;
// queries past the first see keys up to their own position.
AttentionInputs with_cache(
    KvCache* cache,
    std::size_t layer,
    const at::Tensor& k,
    const at::Tensor& v);

// `layers` empty caches of (batch, heads, context, head_width) on `device`.
KvCache empty_cache(
    std::int64_t layers,
    std::int64_t batch,
    std::int64_t heads,
    std::int64_t context,
    std::int64_t head_width,
    const c10::Device& device);

} // namespace hotloop::model::lm
