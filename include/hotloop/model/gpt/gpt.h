#pragma once
// GPT: a decoder-only transformer language model, as GPT-2 is built
// (pre-LayerNorm blocks, causal self-attention through
// at::scaled_dot_product_attention, tanh-approximated GELU, learned positions,
// the output projection tied to the token embedding). Parameter names and
// layouts are Hugging Face GPT2LMHeadModel's:
// "transformer.h.0.attn.c_attn.weight" is an (in, out) matrix as its Conv1D
// keeps it, so its safetensors files load as they are (hf_gpt2_weights below
// writes them back).
//
// forward: (B, T) int64 token ids -> (B, T, padded_vocab) logits. The
// vocabulary is padded to a multiple of 64 (as llm.c does) for the matrix
// units; the padded rows are never a target and are never sampled.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hotloop/model/gpt/gpt_config.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/shard_units.h"

namespace hotloop::model {

// The named sizes (gpt-nano, gpt-mini: nanoGPT's character-level Shakespeare
// size, gpt2, gpt2-medium), their shapes and recipes are the GPT family's
// entry (model/family.h; model/gpt/gpt_family.cpp).
// The named size with `options`' non-zero fields on top of it. The named
// small sizes take their vocabulary from options.vocab (the data's).
GptConfig gpt_config(const ModelOptions& options);

class Gpt : public LanguageModel, public ShardUnits {
 public:
  explicit Gpt(GptConfig config);

  using LanguageModel::forward;
  at::Tensor hidden_states(const at::Tensor& tokens, const PackedRows& rows)
      override;
  at::Tensor output_weight() const override;
  at::Tensor forward(const at::Tensor& tokens, KvCache& cache) override;
  KvCache new_cache(std::int64_t batch) const override;
  std::int64_t context() const override {
    return config_.context;
  }
  std::int64_t vocab() const override {
    return config_.vocab;
  }

  std::string head_name() const override {
    return "lm_head"; // tied to transformer.wte: there is no separate head
  }
  // Any mode but none recomputes each block in backward.
  void set_checkpointing(Checkpointing mode) override;
  // --shard 3: each block (the embeddings, final norm and head stay whole).
  std::vector<std::shared_ptr<torch::nn::Module>> shard_units() const override;
  bool decays(const std::string& name, const at::Tensor& p) const override;
  // Hugging Face GPT-2 files: the token embedding padded with zero rows to
  // padded_vocab(), lm_head.weight (tied: the same tensor) and the
  // attention-mask buffers of older files dropped.
  void adapt_weights(
      std::vector<std::pair<std::string, at::Tensor>>& weights) const override;
  double training_flops_per_sample() const override;
  const GptConfig& config() const {
    return config_;
  }

 private:
  struct Parts;
  GptConfig config_;
  std::shared_ptr<Parts> parts_;
  bool checkpoint_blocks_ = false;
};

// This model's weights as Hugging Face's GPT2LMHeadModel has them (the
// embedding cut to the real vocabulary), and its GPT2Config as JSON:
// save both as model.safetensors and config.json and
// GPT2LMHeadModel.from_pretrained(dir) loads them.
std::vector<std::pair<std::string, at::Tensor>> hf_gpt2_weights(
    const Gpt& model);
std::string hf_gpt2_config(const GptConfig& config);

} // namespace hotloop::model
