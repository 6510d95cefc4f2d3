// The GPT family: its named sizes (shape and recipe in one row), the
// config a --model names, and GPT-2's Hugging Face adapter: config.json both
// ways and the weights (their names are the model's own: model/gpt/gpt.h).

#include <optional>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/model/families.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/lm/hf_adapters.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/named_sizes.h"

namespace hotloop::model {

namespace {

struct NamedSize {
  const char* name;
  GptConfig config;
  bool vocab_from_data; // the small sizes: the data's vocabulary
  // gpt-nano: measured on text:fortunes (docs/language-models.md);
  // gpt-mini: nanoGPT's character-level Shakespeare; gpt2*: GPT-3's table.
  SizeRecipe recipe;
};

const std::vector<NamedSize>& sizes() {
  static const std::vector<NamedSize> s = {
      {"gpt-nano", {4, 4, 128, 128, 256}, true, {1e-2, true, false}},
      {"gpt-mini", {6, 6, 384, 256, 256}, true, {1e-3, true, false}},
      {"gpt2", {12, 12, 768, 1024, 50257}, false, {6e-4, false, false}},
      {"gpt2-medium",
       {24, 16, 1024, 1024, 50257},
       false,
       {3e-4, false, false}}};
  return s;
}

} // namespace

GptConfig gpt_config(const ModelOptions& o) {
  const NamedSize* it = &lm::find_size(sizes(), o.name, "GPT");
  GptConfig c = it->config;
  auto take = [](std::int64_t& field, std::int64_t v) {
    if (v > 0) {
      field = v;
    }
  };
  take(c.layers, o.lm.layers);
  take(c.heads, o.lm.heads);
  take(c.width, o.lm.width);
  take(c.context, o.lm.context);
  take(c.vocab, o.lm.vocab);
  c.validate();
  return c;
}

std::vector<std::pair<std::string, at::Tensor>> hf_gpt2_weights(
    const Gpt& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : model.named_parameters()) {
    at::Tensor t = p.value().detach().to(at::kCPU, at::kFloat);
    if (p.key() == "transformer.wte.weight") {
      t = t.narrow(0, 0, model.config().vocab);
    }
    out.emplace_back(p.key(), t.contiguous());
  }
  return out;
}

std::string hf_gpt2_config(const GptConfig& c) {
  return fmt::format(
      R"({{
  "architectures": ["GPT2LMHeadModel"],
  "model_type": "gpt2",
  "vocab_size": {},
  "n_positions": {},
  "n_embd": {},
  "n_layer": {},
  "n_head": {},
  "n_inner": null,
  "activation_function": "gelu_new",
  "resid_pdrop": 0.0,
  "embd_pdrop": 0.0,
  "attn_pdrop": 0.0,
  "layer_norm_epsilon": 1e-05,
  "initializer_range": 0.02,
  "tie_word_embeddings": true,
  "bos_token_id": {},
  "eos_token_id": {},
  "torch_dtype": "float32"
}}
)",
      c.vocab,
      c.context,
      c.width,
      c.layers,
      c.heads,
      // GPT-2's <|endoftext|> when the vocabulary is GPT-2's, else none.
      c.vocab == 50257 ? "50256" : "null",
      c.vocab == 50257 ? "50256" : "null");
}

ModelFamilyEntry gpt_family() {
  ModelFamilyEntry e(
      ModelFamily::Gpt,
      "GPT",
      "GPT-2's decoder (learned positions, LayerNorm, GELU MLP, tied head)");
  e.sizes = lm::named_models(sizes());
  e.hf_architectures = {{"GPT2LMHeadModel", "gpt2"}};
  e.lora_targets = {"c_attn", "c_proj", "c_fc"};
  e.checkpointing = "any mode recomputes each transformer block";
  e.make = [](const ModelOptions& o, const ModelKind&) {
    return std::make_shared<Gpt>(gpt_config(o));
  };
  e.resolve = [](const ModelOptions& o, const ModelKind&) {
    return lm::with_shape(o, gpt_config(o));
  };
  e.hf.read = [](const nlohmann::json& j,
                 const std::string& architecture,
                 std::int64_t context,
                 const std::filesystem::path& file) {
    const GptConfig c = lm::read_gpt2_config(j, context, file);
    return HfModelConfig{architecture, c.context, c};
  };
  lm::set_hf_model<Gpt, GptConfig>(e.hf, hf_gpt2_config, hf_gpt2_weights);
  return e;
}

} // namespace hotloop::model
