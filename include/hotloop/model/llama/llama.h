#pragma once
// The Llama family: decoder-only transformers as Llama 3, Qwen2/2.5,
// SmolLM2 and Mistral are built. Pre-norm blocks with RMSNorm, rotary
// position embeddings (RoPE; its theta, and Llama 3's or linear frequency
// scaling), grouped-query attention through at::scaled_dot_product_attention,
// a SwiGLU MLP, no biases (Qwen2: on q/k/v; Llama's attention_bias: on all
// four projections), the output projection tied to the token embedding or
// its own. Parameter names and layouts are Hugging Face LlamaForCausalLM's
// ("model.layers.0.self_attn.q_proj.weight", nn.Linear's (out, in)), which
// Qwen2ForCausalLM and MistralForCausalLM share: their files load as they
// are (model/lm/hf_checkpoint.h reads and writes the folders).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hotloop/core/named.h"
#include "hotloop/model/llama/llama_config.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/shard_units.h"

namespace hotloop::model {

// The built-in sizes (llama-nano for the CPU, and the shapes of
// SmolLM2-135M, Qwen2.5-0.5B and Llama-3.2-1B with random weights, at
// --context 1024 by default) are the Llama family's entry (model/family.h;
// model/llama/llama_family.cpp).
// The named size with `options`' non-zero fields on top of it (the small
// size takes its vocabulary from options.vocab). Widths that move keep the
// size's proportions: intermediate 8/3 of width (rounded up to 32),
// kv_heads the size's when it divides heads, else heads.
LlamaConfig llama_config(const ModelOptions& options);

namespace lm {
struct RopeTable; // src/hotloop/model/llama/llama.cpp
}

class Llama : public LanguageModel, public ShardUnits {
 public:
  explicit Llama(LlamaConfig config);

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
    return "lm_head";
  }
  // Any mode but none recomputes each block in backward.
  void set_checkpointing(Checkpointing mode) override;
  // --shard 3: each block (the embeddings, final norm and head stay whole).
  std::vector<std::shared_ptr<torch::nn::Module>> shard_units() const override;
  // Matrices only: not the norms or biases (nor, as in nanoGPT, the
  // embedding when it is also the output).
  bool decays(const std::string& name, const at::Tensor& p) const override;
  // A tied model drops a file's lm_head.weight (the embedding is the head);
  // RoPE's inv_freq buffers of older files are dropped.
  void adapt_weights(
      std::vector<std::pair<std::string, at::Tensor>>& weights) const override;
  double training_flops_per_sample() const override;
  const LlamaConfig& config() const {
    return config_;
  }

 private:
  struct Parts;
  LlamaConfig config_;
  std::shared_ptr<Parts> parts_;
  std::shared_ptr<torch::nn::Module> lm_head_; // untied only
  std::shared_ptr<lm::RopeTable> rope_;
  bool checkpoint_blocks_ = false;
};

// config.json as Hugging Face's LlamaConfig / Qwen2Config / MistralConfig
// (the family's) writes it.
std::string hf_llama_config(const LlamaConfig& config);

} // namespace hotloop::model
