#include "attention_cache.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/errors.h"

namespace hotloop::model::lm {

void check_tokens(
    const at::Tensor& tokens,
    std::int64_t context,
    const char* model) {
  if (tokens.dim() != 2) {
    throw UsageError(fmt::format(
        "{}: expected (batch, sequence) token ids, got a tensor of {} dimension(s)",
        model,
        tokens.dim()));
  }
  if (tokens.size(1) > context) {
    throw UsageError(
        fmt::format(
            "a sequence of {} tokens is longer than the model's context of {}",
            tokens.size(1),
            context),
        "train with --context at least as long, or feed shorter sequences");
  }
}

void check_rows(
    const PackedRows& rows,
    const at::Tensor& tokens,
    const char* model) {
  if (!rows.empty() && rows.positions.sizes() != tokens.sizes()) {
    throw UsageError(fmt::format(
        "{}: positions of shape {} for tokens of shape {}",
        model,
        rows.positions.sizes(),
        tokens.sizes()));
  }
}

void check_cache(
    const KvCache& cache,
    const at::Tensor& tokens,
    std::int64_t layers,
    std::int64_t context,
    const char* model) {
  if (static_cast<std::int64_t>(cache.keys.size()) != layers ||
      cache.values.size() != cache.keys.size() || tokens.dim() != 2 ||
      tokens.size(0) != cache.keys.front().size(0)) {
    throw UsageError(
        fmt::format(
            "{}: the KV cache does not fit this model and batch", model),
        "make it with new_cache(batch) of the same model");
  }
  if (cache.length + tokens.size(1) > context) {
    throw UsageError(fmt::format(
        "{} cached + {} new tokens are longer than the model's context of {}",
        cache.length,
        tokens.size(1),
        context));
  }
}

AttentionInputs with_cache(
    KvCache* cache,
    std::size_t layer,
    const at::Tensor& k,
    const at::Tensor& v) {
  if (cache == nullptr) {
    return {k, v, true, std::nullopt};
  }
  const std::int64_t t = k.size(2);
  const std::int64_t start = cache->length;
  at::Tensor& ck = cache->keys[layer];
  at::Tensor& cv = cache->values[layer];
  if (!ck.defined() || ck.scalar_type() != k.scalar_type()) {
    const std::int64_t capacity = ck.defined() ? ck.size(2) : 0;
    ck = at::empty({k.size(0), k.size(1), capacity, k.size(3)}, k.options());
    cv = at::empty({v.size(0), v.size(1), capacity, v.size(3)}, v.options());
  }
  ck.narrow(2, start, t).copy_(k);
  cv.narrow(2, start, t).copy_(v);
  AttentionInputs in{
      ck.narrow(2, 0, start + t), cv.narrow(2, 0, start + t), true, {}};
  if (start > 0) {
    in.causal = false;
    if (t > 1) {
      // Query i (position start + i) sees keys 0 .. start + i.
      in.mask = at::ones(
                    {t, start + t},
                    at::TensorOptions().dtype(at::kBool).device(k.device()))
                    .tril(start);
    }
  }
  return in;
}

KvCache empty_cache(
    std::int64_t layers,
    std::int64_t batch,
    std::int64_t heads,
    std::int64_t context,
    std::int64_t head_width,
    const c10::Device& device) {
  KvCache cache;
  for (std::int64_t i = 0; i < layers; ++i) {
    cache.keys.push_back(at::empty(
        {batch, heads, context, head_width},
        at::TensorOptions().device(device)));
    cache.values.push_back(at::empty_like(cache.keys.back()));
  }
  return cache;
}

} // namespace hotloop::model::lm
