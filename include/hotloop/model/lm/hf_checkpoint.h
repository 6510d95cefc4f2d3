#pragma once
// Hugging Face model folders, as save_pretrained writes them: config.json and
// the weights in model.safetensors, or in shards named by
// model.safetensors.index.json (pytorch_model.bin and its index too).
// Read: the architectures the families' entries name (model/family.h:
// LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, GPT2LMHeadModel),
// each by its family's adapter (model/gpt/gpt_family.cpp,
// model/llama/llama_family.cpp). Written: config.json + model.safetensors that
// from_pretrained loads, by the same adapters. A family's adapter is its
// entry's HfAdapter; HfModelConfig holds the config of whichever family read
// it, so a new family adds nothing here.

#include <any>
#include <cstdint>
#include <string>

#include "hotloop/errors.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/model/weights.h"

namespace hotloop::model {

class LanguageModel; // model/lm/language_model.h

// A folder holding a config.json.
bool is_hf_folder(const std::string& path);

// What a folder's config.json describes: the architecture it names and the
// config of the family that reads it (model/family.h's hf_architectures).
struct HfModelConfig {
  std::string architecture; // "LlamaForCausalLM", ...
  std::int64_t context = 0; // the window it runs
  std::any config; // the family's own config (GptConfig, LlamaConfig, ...)

  // The family that read it (Gpt or Llama).
  ModelFamily family() const;
  // The config as its family's type; Error for another family's.
  template <typename Config>
  const Config& as() const {
    const auto* c = std::any_cast<Config>(&config);
    if (c == nullptr) {
      throw Error(
          architecture + ": its config.json was read by another family");
    }
    return *c;
  }
};

// DIR/config.json read. `context` > 0: the window to run (at most the
// model's positions; a GPT-2's is its position table's size), else the
// model's positions up to 1024. Throws DataError for a missing or malformed
// file, UsageError naming the field for what hotloop does not run (another
// architecture, sliding-window attention shorter than the context, mixture
// of experts, another RoPE type or activation).
HfModelConfig read_hf_config(const std::string& dir, std::int64_t context = 0);

// Every tensor of DIR's weight files, in file order. DataError naming the
// folder when it has none, or the index or shard that is missing or broken.
StateDict read_hf_weights(const std::string& dir);

// What write_hf_folder() writes for a model: its config.json's text and its
// weights as transformers names them (float32, on the CPU).
struct HfFolderFiles {
  std::string config;
  StateDict weights;
};

// Writes `model` into DIR as config.json and model.safetensors, as its
// family's entry (model/family.h: HfAdapter::write) gives them. Returns the
// weight file's path. UsageError for a model no family writes.
std::string write_hf_folder(const std::string& dir, const LanguageModel& model);

} // namespace hotloop::model
