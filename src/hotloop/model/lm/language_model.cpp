#include "hotloop/model/lm/language_model.h"

#include <algorithm>
#include <iterator>
#include <variant>

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/model.h"
#include "hotloop/model/model_kind.h"

namespace hotloop::model {

const std::vector<std::string>& language_model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    std::copy_if(
        model_names().begin(),
        model_names().end(),
        std::back_inserter(n),
        [](const std::string& name) {
          return model_kind(name).language_model();
        });
    return n;
  }();
  return names;
}

namespace {

// The config.json of `kind`'s folder (`o` says the context and names it).
HfModelConfig folder_config(const ModelKind& kind, const ModelOptions& o) {
  const std::string dir = kind.folder();
  if (dir.empty() || !is_hf_folder(dir)) {
    throw UsageError(
        fmt::format("--model {}: not a folder with a config.json", o.name),
        "hf:DIR names a Hugging Face model folder (what save_pretrained writes)");
  }
  return read_hf_config(dir, o.context);
}

} // namespace

ModelOptions resolve_language_model(const ModelOptions& options) {
  ModelOptions o = options;
  auto fill = [&o](
                  std::int64_t layers,
                  std::int64_t heads,
                  std::int64_t width,
                  std::int64_t context,
                  std::int64_t vocab) {
    o.layers = layers;
    o.heads = heads;
    o.width = width;
    o.context = context;
    o.vocab = vocab;
  };
  const ModelKind kind = model_kind(o.name);
  if (kind.family == ModelFamily::Gpt) {
    const GptConfig c = gpt_config(o);
    fill(c.layers, c.heads, c.width, c.context, c.vocab);
  } else if (kind.family == ModelFamily::Llama) {
    const LlamaConfig c = llama_config(o);
    fill(c.layers, c.heads, c.width, c.context, c.vocab);
  } else if (kind.family == ModelFamily::HfFolder) {
    for (auto [flag, v] :
         {std::pair{"layers", o.layers},
          {"heads", o.heads},
          {"width", o.width},
          {"vocab", o.vocab}}) {
      if (v > 0) {
        throw UsageError(
            fmt::format(
                "--{} {}: {}'s size is its config.json's", flag, v, o.name),
            fmt::format(
                "drop --{} (only --context applies to a folder)", flag));
      }
    }
    // The folder says the rest; the run records the window it runs.
    o.context = folder_config(kind, o).context();
  } else {
    throw UsageError(fmt::format("--model {}: not a language model", o.name));
  }
  return o;
}

std::shared_ptr<LanguageModel> make_language_model(const ModelOptions& o) {
  const ModelKind kind = model_kind(o.name);
  if (!kind.language_model()) {
    throw UsageError(fmt::format("--model {}: not a language model", o.name));
  }
  if (!kind.hf_folder()) {
    // A named size: its family's entry builds it.
    return std::static_pointer_cast<LanguageModel>(
        family_entry(kind.family).make(o));
  }
  // A folder: the family its config.json names.
  const HfModelConfig c = folder_config(kind, o);
  if (const auto* gpt = std::get_if<GptConfig>(&c.config)) {
    return std::make_shared<Gpt>(*gpt);
  }
  return std::make_shared<Llama>(std::get<LlamaConfig>(c.config));
}

} // namespace hotloop::model
