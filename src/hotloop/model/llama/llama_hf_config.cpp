// A Llama-family config.json (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM: model/lm/hf_configs.h).

#include <algorithm>

#include "hotloop/model/lm/hf_configs.h"

namespace hotloop::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

RopeOptions read_rope(const json& j, const fs::path& file) {
  RopeOptions r;
  // transformers 5 writes "rope_parameters" (theta inside); 4.x
  // "rope_theta" and "rope_scaling".
  const json* scaling = nullptr;
  if (const auto p = j.find("rope_parameters");
      p != j.end() && p->is_object()) {
    scaling = &*p;
    r.theta = lm::field(*p, "rope_theta", r.theta, file);
  }
  r.theta = lm::field(j, "rope_theta", r.theta, file);
  if (const auto s = j.find("rope_scaling"); s != j.end() && s->is_object()) {
    scaling = &*s;
  }
  if (scaling == nullptr) {
    return r;
  }
  std::string type = lm::field<std::string>(*scaling, "rope_type", "", file);
  if (type.empty()) {
    type = lm::field<std::string>(*scaling, "type", "default", file);
  }
  if (type == "default") {
    return r;
  }
  if (type != "linear" && type != "llama3") {
    lm::refuse(
        file,
        fmt::format("RoPE scaling \"{}\"", type),
        "hotloop's RoPE takes no scaling, linear or llama3");
  }
  r.type = parse_named<RopeType>(kRopeTypeNames, type, "rope_type");
  r.factor = lm::field(*scaling, "factor", 1.0, file);
  r.low_freq_factor = lm::field(*scaling, "low_freq_factor", 1.0, file);
  r.high_freq_factor = lm::field(*scaling, "high_freq_factor", 4.0, file);
  r.original_context = lm::field<std::int64_t>(
      *scaling, "original_max_position_embeddings", 8192, file);
  return r;
}

} // namespace

LlamaConfig lm::read_llama_config(
    const json& j,
    const std::string& architecture,
    std::int64_t context,
    const fs::path& file) {
  LlamaConfig c;
  c.family = parse_named<LlamaFamily>(
      kLlamaArchitectures, architecture, "config.json architectures");
  for (const char* key :
       {"num_local_experts", "num_experts", "moe_intermediate_size"}) {
    if (j.contains(key) && !j[key].is_null()) {
      lm::refuse(
          file,
          fmt::format("a mixture of experts (\"{}\")", key),
          "hotloop runs dense Llama-family models");
    }
  }
  const std::string act = lm::field<std::string>(j, "hidden_act", "silu", file);
  if (act != "silu") {
    lm::refuse(
        file,
        fmt::format("hidden_act \"{}\"", act),
        "the Llama family's MLP is SwiGLU (silu)");
  }
  using lm::size_field;
  c.layers = size_field(j, "num_hidden_layers", 0, 1, lm::kMaxLayers, file);
  c.heads = size_field(j, "num_attention_heads", 0, 1, lm::kMaxHeads, file);
  c.kv_heads =
      size_field(j, "num_key_value_heads", c.heads, 1, lm::kMaxHeads, file);
  c.width = size_field(j, "hidden_size", 0, 1, lm::kMaxWidth, file);
  c.head_width = size_field(j, "head_dim", 0, 0, lm::kMaxWidth, file);
  c.intermediate =
      size_field(j, "intermediate_size", 0, 1, 8 * lm::kMaxWidth, file);
  c.max_positions = size_field(
      j, "max_position_embeddings", 2048, 1, lm::kMaxPositions, file);
  c.vocab = size_field(j, "vocab_size", 0, 1, lm::kMaxVocabulary, file);
  c.rms_eps = lm::field(j, "rms_norm_eps", 1e-6, file);
  c.init_std = lm::field(j, "initializer_range", 0.02, file);
  c.rope = read_rope(j, file);
  c.tied =
      lm::field(j, "tie_word_embeddings", false, file); // transformers' default
  if (c.family == LlamaFamily::Qwen2) {
    c.qkv_bias = true; // Qwen2's attention: biases on q, k, v
  } else {
    c.qkv_bias = c.o_bias = lm::field(j, "attention_bias", false, file);
  }
  c.mlp_bias = lm::field(j, "mlp_bias", false, file);
  c.bos = lm::token_id(j, "bos_token_id");
  c.eos = lm::token_id(j, "eos_token_id");
  c.context =
      context > 0 ? context : std::min<std::int64_t>(c.max_positions, 1024);
  // Sliding-window attention: the same model while the window covers the
  // whole context.
  std::int64_t window = 0;
  if (c.family == LlamaFamily::Mistral ||
      lm::field(j, "use_sliding_window", false, file)) {
    window = lm::field<std::int64_t>(j, "sliding_window", 0, file);
  }
  if (const auto types = j.find("layer_types");
      types != j.end() && types->is_array()) {
    for (const auto& t : *types) {
      if (t.is_string() && t.get<std::string>() != "full_attention" &&
          window == 0) {
        lm::refuse(
            file,
            fmt::format("layer type \"{}\"", t.get<std::string>()),
            "hotloop's attention is full causal attention");
      }
    }
  }
  if (window > 0 && c.context > window) {
    lm::refuse(
        file,
        fmt::format(
            "sliding-window attention of {} tokens, shorter than the context of {}",
            window,
            c.context),
        fmt::format(
            "pass --context {} or less: inside the window it is full attention",
            window));
  }
  c.validate();
  return c;
}

} // namespace hotloop::model
