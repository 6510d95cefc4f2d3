#pragma once
// What a --model value names, answered in one place: the family it belongs
// to and, for a folder or an exported file, its path. The rest of the code
// switches on this typed value instead of testing the name's text
// ("hf:"? "torchscript:"? one of the GPT sizes?).

#include <string>

namespace hotloop::model {

enum class ModelFamily {
  Image, // mlp, cnn-small, the ResNets (model/image/)
  Gpt, // a built-in GPT size: gpt-nano, gpt-mini, gpt2, gpt2-medium
  Llama, // a built-in Llama-family size: llama-nano, smollm2-135m, ...
  HfFolder, // hf:DIR: a Hugging Face folder, GPT-2 or Llama-family by its
            // config.json
  Exported, // torchscript:FILE: a module exported from Python
  Unknown, // none of those: a C++ user's own model, or a typo (validate()
           // says which models there are)
};

struct ModelKind {
  ModelFamily family = ModelFamily::Unknown;
  // HfFolder: DIR; Exported: FILE (empty when "torchscript:" names none);
  // otherwise empty.
  std::string path;

  // A decoder-only transformer on token ids (model/lm/language_model.h).
  bool language_model() const {
    return family == ModelFamily::Gpt || family == ModelFamily::Llama ||
        family == ModelFamily::HfFolder;
  }
  bool hf_folder() const {
    return family == ModelFamily::HfFolder;
  }
  bool exported() const {
    return family == ModelFamily::Exported;
  }
  // DIR of hf:DIR; "" for any other kind.
  std::string folder() const {
    return hf_folder() ? path : std::string();
  }
};

// The kind of `model_name`. Never throws: an unknown name is Unknown.
ModelKind model_kind(const std::string& model_name);

} // namespace hotloop::model
