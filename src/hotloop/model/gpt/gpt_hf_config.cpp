// A GPT2LMHeadModel's config.json (model/lm/hf_configs.h).

#include "hotloop/model/lm/hf_configs.h"

namespace hotloop::model {

using namespace lm; // the field readers

GptConfig lm::read_gpt2_config(
    const nlohmann::json& j,
    std::int64_t context,
    const std::filesystem::path& file) {
  GptConfig c;
  c.layers = size_field(j, "n_layer", 12, 1, kMaxLayers, file);
  c.heads = size_field(j, "n_head", 12, 1, kMaxHeads, file);
  c.width = size_field(j, "n_embd", 768, 1, kMaxWidth, file);
  c.context = size_field(j, "n_positions", 1024, 1, kMaxPositions, file);
  c.vocab = size_field(j, "vocab_size", 50257, 1, kMaxVocabulary, file);
  const std::string act =
      field<std::string>(j, "activation_function", "gelu_new", file);
  if (act != "gelu_new") {
    refuse(
        file,
        fmt::format("activation_function \"{}\"", act),
        "hotloop's GPT uses GPT-2's tanh GELU (gelu_new)");
  }
  if (field<std::int64_t>(j, "n_inner", 4 * c.width, file) != 4 * c.width) {
    refuse(
        file,
        "an MLP width other than 4 x n_embd",
        "hotloop's GPT has GPT-2's 4x MLP");
  }
  if (context > 0 && context != c.context) {
    throw UsageError(
        fmt::format(
            "--context {}: {} is a GPT-2 with a position table of {}",
            context,
            file.string(),
            c.context),
        "drop --context: the table's size is the model's context");
  }
  c.validate();
  return c;
}

} // namespace hotloop::model
