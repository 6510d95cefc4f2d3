#pragma once
// What hotloop's language models share: GPT (model/gpt/gpt.h) and the
// Llama family (model/llama/llama.h: Llama, Qwen2, Mistral) are decoder-only
// transformers from (B, T) token ids to (B, T, V) next-token logits, trained
// with the next-token loss, sampled through a KV cache (model/lm/generate.h),
// sized by name or read from a Hugging Face folder ("hf:DIR").

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/model/lm/linear_cross_entropy.h"
#include "hotloop/model/model.h"
#include "hotloop/model/model_kind.h"

namespace hotloop::model {

// Keys and values of every layer, for generation: one forward per new token
// instead of one over the whole sequence.
struct KvCache {
  std::vector<at::Tensor> keys; // per layer (B, kv heads, capacity, head width)
  std::vector<at::Tensor> values;
  std::int64_t length = 0; // positions filled
};

class LanguageModel : public Model {
 public:
  using Model::forward;
  // (B, T) token ids -> (B, T, V) logits: the output layer on
  // hidden_states().
  at::Tensor forward(const at::Tensor& tokens) override;
  // The final hidden states (B, T, width), after the last norm: what the
  // output layer takes. With `rows` (packed rows) each token sees only the
  // earlier tokens of its own sequence, at its position in it.
  virtual at::Tensor hidden_states(
      const at::Tensor& tokens,
      const PackedRows& rows) = 0;
  // The output layer's weight (V or GPT's padded V, width): logits are
  // hidden · weightᵀ.
  virtual at::Tensor output_weight() const = 0;
  // The next-token loss through the chunked output layer, on the positions
  // with a target only (batch.trained of them, when counted), its softmax
  // over the vocab() real tokens.
  at::Tensor objective(const ModelBatch& batch, const LossOptions& options)
      override;
  bool takes_packed_rows() const override {
    return true;
  }
  // Evaluation's summed loss and argmax hits the same way, without
  // gradients.
  lm::LinearCrossEntropySums evaluation_sums(const ModelBatch& batch);

 private:
  // The output weight's rows of real tokens: the loss's softmax is over the
  // vocabulary, not GPT's padding rows (a Hugging Face GPT-2's loss is over
  // its 50257 tokens).
  at::Tensor real_rows(const at::Tensor& weight) const;

 public:
  // The logits of `tokens` (B, T) continuing what `cache` holds (positions
  // cache.length ..): fills the cache. The first call takes the prompt.
  virtual at::Tensor forward(const at::Tensor& tokens, KvCache& cache) = 0;
  virtual KvCache new_cache(std::int64_t batch) const = 0;
  // The longest sequence it reads (the training window).
  virtual std::int64_t context() const = 0;
  // Real tokens: the logits may have more columns (GPT pads its vocabulary
  // for the matrix units); those are never a target and never sampled.
  virtual std::int64_t vocab() const = 0;

  at::Tensor loss(
      const at::Tensor& logits,
      const at::Tensor& targets,
      const LossOptions& options) const override {
    return next_token_loss(logits, targets, options);
  }
  std::int64_t tokens_per_sample() const override {
    return context();
  }
};

// The built-in sizes: gpt-nano, gpt-mini, gpt2, gpt2-medium, llama-nano,
// smollm2-135m, qwen2.5-0.5b, llama3.2-1b.
const std::vector<std::string>& language_model_names();
// Whether a name is one of those or "hf:DIR": model_kind() (model_kind.h).

// `options` with every size field (layers, heads, width, context, vocab)
// filled in: the named size's or the folder's, under the non-zero fields of
// `options`, by the entry of `kind`'s family (model/family.h). `kind` is
// what options.name names (model_kind()); the one-argument form asks it.
// UsageError for an unknown name or a size that does not hold together;
// ConfigError for a folder whose config.json hotloop cannot run.
ModelOptions resolve_language_model(
    const ModelOptions& options,
    const ModelKind& kind);
ModelOptions resolve_language_model(const ModelOptions& options);

// A new model with fresh weights (seed the global generator first), in
// training mode on the CPU.
std::shared_ptr<LanguageModel> make_language_model(const ModelOptions& options);

} // namespace hotloop::model
