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

// The architecture each LlamaFamily is written as (its model_type:
// kLlamaFamilyNames).
constexpr Named<LlamaFamily> kArchitectures[] = {
    {LlamaFamily::Llama, "LlamaForCausalLM"},
    {LlamaFamily::Qwen2, "Qwen2ForCausalLM"},
    {LlamaFamily::Mistral, "MistralForCausalLM"}};

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

LlamaConfig lm::read_llama_config(
    const json& j,
    const std::string& architecture,
    std::int64_t context,
    const fs::path& file) {
  LlamaConfig c;
  c.family = parse_named<LlamaFamily>(
      kArchitectures, architecture, "config.json architectures");
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

std::string hf_llama_config(const LlamaConfig& c) {
  json j;
  j["architectures"] = {name_of<LlamaFamily>(kArchitectures, c.family)};
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
  for (const auto& a : kArchitectures) {
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
