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
#include "hotloop/model/lm/language_model.h"

namespace hotloop::model {

// RoPE's frequency scaling ("rope_scaling" / "rope_parameters" in config.json).
enum class RopeType {
  Default, // none
  Linear, // every frequency divided by factor
  Llama3, // Llama 3.1's: low frequencies divided by factor, a smooth band
};
inline constexpr Named<RopeType> kRopeTypeNames[] = {
    {RopeType::Default, "default"},
    {RopeType::Linear, "linear"},
    {RopeType::Llama3, "llama3"}};

struct RopeOptions {
  double theta = 10000;
  RopeType type = RopeType::Default;
  double factor = 1;
  double low_freq_factor = 1; // llama3
  double high_freq_factor = 4; // llama3
  std::int64_t original_context = 8192; // llama3
};

// Which Hugging Face architecture the weights are written as: the same
// modules, another config.json.
enum class LlamaFamily { Llama, Qwen2, Mistral };
inline constexpr Named<LlamaFamily> kLlamaFamilyNames[] = {
    {LlamaFamily::Llama, "llama"},
    {LlamaFamily::Qwen2, "qwen2"},
    {LlamaFamily::Mistral, "mistral"}};

struct LlamaConfig {
  LlamaFamily family = LlamaFamily::Llama;
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2; // grouped-query attention: heads share K and V
  std::int64_t width = 128; // hidden_size
  std::int64_t head_width = 0; // head_dim; 0: width / heads
  std::int64_t intermediate = 384; // the MLP's inner width
  std::int64_t context = 128; // the longest sequence hotloop runs
  std::int64_t max_positions = 128; // max_position_embeddings (config.json)
  std::int64_t vocab = 256;
  double rms_eps = 1e-5;
  RopeOptions rope;
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  bool tied = true; // lm_head is the token embedding
  std::optional<std::int64_t> bos; // bos_token_id / eos_token_id
  std::optional<std::int64_t> eos;
  double init_std = 0.02; // initializer_range

  std::int64_t head_dim() const {
    return head_width > 0 ? head_width : width / heads;
  }
  // Parameters without the token embedding, the output projection included
  // (the "N" of 6N FLOPs/token, as for GPT).
  std::int64_t non_embedding_parameters() const;
  // 6N + 12 * layers * context * heads * head_dim (PaLM, appendix B).
  double training_flops_per_token() const;
  void validate() const; // UsageError naming the flag or field
};

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

class Llama : public LanguageModel {
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
