#pragma once
// A Llama-family model's shape (model/llama/llama.h builds it). No LibTorch
// here: the config.json reader builds without it.

#include <cstdint>
#include <optional>

#include "hotloop/core/named.h"

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

} // namespace hotloop::model
