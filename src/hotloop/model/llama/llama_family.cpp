// The Llama family: its named sizes (shape and recipe in one row), the
// config a --model names, and the Hugging Face adapter: config.json of
// LlamaForCausalLM, Qwen2ForCausalLM and MistralForCausalLM both ways, and
// the weights (the model's names are Hugging Face's: model/llama/llama.h).

#include <algorithm>
#include <optional>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/model/families.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/hf_adapters.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/named_sizes.h"

namespace hotloop::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using lm::kLlamaArchitectures;

struct NamedSize {
  const char* name;
  LlamaConfig config;
  bool vocab_from_data; // the small size: the data's vocabulary
  // llama-nano: measured on text:fortunes (docs/language-models.md); the
  // shapes trained from scratch: their size's row of GPT-3's table.
  SizeRecipe recipe;
};

// llama-nano, for the CPU; the others are the shapes of SmolLM2-135M
// (HuggingFaceTB/SmolLM2-135M), Qwen2.5-0.5B (Qwen/Qwen2.5-0.5B: biases on q,
// k and v) and Llama-3.2-1B (meta-llama/Llama-3.2-1B: Llama 3's RoPE scaling),
// as their config.json files give them. intermediate: llama-nano's is 8/3 of
// the width, rounded up to 32.
// One size a row. GCC 12 counts a designated initializer's unnamed fields
// as missing; here they take their defaults on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
// clang-format off
const LlamaConfig kNano{
    .layers = 4, .heads = 4, .kv_heads = 2, .width = 128, .intermediate = 352,
    .context = 128, .max_positions = 128, .vocab = 256};
const LlamaConfig kSmolLm2_135m{
    .layers = 30, .heads = 9, .kv_heads = 3, .width = 576, .intermediate = 1536,
    .context = 1024, .max_positions = 8192, .vocab = 49152,
    .rope = {.theta = 100000}, .bos = 0, .eos = 0};
const LlamaConfig kQwen25_05b{
    .family = LlamaFamily::Qwen2,
    .layers = 24, .heads = 14, .kv_heads = 2, .width = 896, .intermediate = 4864,
    .context = 1024, .max_positions = 32768, .vocab = 151936, .rms_eps = 1e-6,
    .rope = {.theta = 1000000}, .qkv_bias = true, .bos = 151643, .eos = 151643};
const LlamaConfig kLlama32_1b{
    .layers = 16, .heads = 32, .kv_heads = 8, .width = 2048, .head_width = 64,
    .intermediate = 8192, .context = 1024, .max_positions = 131072,
    .vocab = 128256,
    .rope = {.theta = 500000, .type = RopeType::Llama3, .factor = 32,
             .low_freq_factor = 1, .high_freq_factor = 4, .original_context = 8192},
    .bos = 128000, .eos = 128001};
// clang-format on
#pragma GCC diagnostic pop

const std::vector<NamedSize>& sizes() {
  static const std::vector<NamedSize> s = {
      {"llama-nano", kNano, true, {1e-2, true, false}},
      {"smollm2-135m", kSmolLm2_135m, false, {1e-3, false, false}},
      {"qwen2.5-0.5b", kQwen25_05b, false, {3e-4, false, false}},
      {"llama3.2-1b", kLlama32_1b, false, {3e-4, false, false}}};
  return s;
}

std::int64_t round_up(std::int64_t v, std::int64_t multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

} // namespace

LlamaConfig llama_config(const ModelOptions& o) {
  const NamedSize* it = &lm::find_size(sizes(), o.name, "Llama-family");
  LlamaConfig c = it->config;
  if (o.lm.heads > 0) {
    c.heads = o.lm.heads;
    if (c.heads % c.kv_heads != 0) {
      c.kv_heads = c.heads;
    }
  }
  if (o.lm.width > 0) {
    c.width = o.lm.width;
    c.head_width = 0;
    c.intermediate = round_up(c.width * 8 / 3, 32);
  }
  if (o.lm.layers > 0) {
    c.layers = o.lm.layers;
  }
  if (o.lm.context > 0) {
    c.context = o.lm.context;
    if (it->vocab_from_data) {
      c.max_positions = c.context; // the small size has no position limit
    }
  }
  if (o.lm.vocab > 0) {
    c.vocab = o.lm.vocab;
  }
  c.validate();
  return c;
}

std::string hf_llama_config(const LlamaConfig& c) {
  json j;
  j["architectures"] = {name_of<LlamaFamily>(kLlamaArchitectures, c.family)};
  j["model_type"] = name_of<LlamaFamily>(kLlamaFamilyNames, c.family);
  j["vocab_size"] = c.vocab;
  j["hidden_size"] = c.width;
  j["intermediate_size"] = c.intermediate;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_positions;
  j["initializer_range"] = c.init_std;
  j["rms_norm_eps"] = c.rms_eps;
  j["tie_word_embeddings"] = c.tied;
  j["rope_theta"] = c.rope.theta;
  if (c.rope.type == RopeType::Default) {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {
        {"rope_type", name_of<RopeType>(kRopeTypeNames, c.rope.type)},
        {"factor", c.rope.factor}};
    if (c.rope.type == RopeType::Llama3) {
      j["rope_scaling"]["low_freq_factor"] = c.rope.low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = c.rope.high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] =
          c.rope.original_context;
    }
  }
  if (c.family == LlamaFamily::Llama) {
    j["attention_bias"] = c.qkv_bias;
    j["mlp_bias"] = c.mlp_bias;
  }
  if (c.family == LlamaFamily::Qwen2) {
    j["use_sliding_window"] = false;
  }
  if (c.family == LlamaFamily::Mistral) {
    j["sliding_window"] = nullptr;
  }
  j["bos_token_id"] = c.bos ? json(*c.bos) : json(nullptr);
  j["eos_token_id"] = c.eos ? json(*c.eos) : json(nullptr);
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

StateDict lm::hf_llama_weights(const Llama& model) {
  const LlamaConfig& c = model.config();
  if (c.qkv_bias != c.o_bias && c.family == LlamaFamily::Llama) {
    throw UsageError(
        "this Llama has biases on q/k/v but not on o_proj: Hugging Face's LlamaConfig cannot say so",
        "export it as a Qwen2-family model");
  }
  StateDict weights;
  for (const auto& p : model.named_parameters()) {
    weights.emplace_back(
        p.key(), p.value().detach().to(at::kCPU, at::kFloat).contiguous());
  }
  return weights;
}

ModelFamilyEntry llama_family() {
  ModelFamilyEntry e(
      ModelFamily::Llama,
      "Llama family",
      "Llama 3, Qwen2/2.5, SmolLM2, Mistral (RMSNorm, RoPE, grouped-query attention, SwiGLU)");
  e.sizes = lm::named_models(sizes());
  for (const auto& a : kLlamaArchitectures) {
    e.hf_architectures.push_back(
        {a.name, name_of<LlamaFamily>(kLlamaFamilyNames, a.value)});
  }
  e.lora_targets = {
      "q_proj",
      "k_proj",
      "v_proj",
      "o_proj",
      "gate_proj",
      "up_proj",
      "down_proj"};
  e.checkpointing = "any mode recomputes each decoder layer";
  e.make = [](const ModelOptions& o, const ModelKind&) {
    return std::make_shared<Llama>(llama_config(o));
  };
  e.resolve = [](const ModelOptions& o, const ModelKind&) {
    return lm::with_shape(o, llama_config(o));
  };
  e.hf.read = [](const nlohmann::json& j,
                 const std::string& architecture,
                 std::int64_t context,
                 const std::filesystem::path& file) {
    const LlamaConfig c = lm::read_llama_config(j, architecture, context, file);
    return HfModelConfig{architecture, c.context, c};
  };
  lm::set_hf_model<Llama, LlamaConfig>(
      e.hf, hf_llama_config, lm::hf_llama_weights);
  return e;
}

} // namespace hotloop::model
