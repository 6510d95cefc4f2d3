#pragma once
// The model families, one entry each: what a family is called, its named
// sizes (each with its shape and the recipe it trains with), the form of
// --model that names a file or folder of it, the Hugging Face architectures
// it reads and writes, the projections LoRA adapts, what activation
// checkpointing recomputes, how it builds a model, a language model's shape
// in full and its Hugging Face adapter. --model's help, train --help's models
// and recipes, model_kind(), recipe_for(), resolve_language_model() and the
// Hugging Face folders' reading and writing (model/lm/hf_checkpoint.h) read
// these entries; a family's own folder (model/gpt/, model/llama/,
// model/image/, model/script/) fills its entry in (Hugging Face folders':
// model/lm/hf_checkpoint.cpp). docs/adding-a-model-family.md walks through
// adding one.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hotloop/model/model_kind.h"

namespace hotloop::model {

class Model; // model/model.h
class LanguageModel; // model/lm/language_model.h
struct ModelOptions;
struct HfModelConfig; // model/lm/hf_checkpoint.h
struct HfFolderFiles; // model/lm/hf_checkpoint.h

// What a named size trains with from scratch (train/recipe.h turns it into
// flag values). `lr` is AdamW's peak rate; `small` sizes train for 3 epochs
// with a short warm-up; `sgd` sizes take SGD with Nesterov momentum at
// 0.1 x batch / 128 instead (the ResNets').
struct SizeRecipe {
  double lr = 1e-3;
  bool small = false;
  bool sgd = false;
};

// One --model value a family builds without a file: "gpt-nano", "resnet18".
struct NamedModel {
  std::string name;
  std::string shape; // one line: "4 layers, 4 heads, width 128, context 128"
  SizeRecipe recipe;
};

// A config.json architecture a family reads and writes, with the model_type
// that names it when "architectures" is absent.
struct HfArchitecture {
  std::string name; // "LlamaForCausalLM"
  std::string model_type; // "llama"
};

// How a family of language models meets Hugging Face folders: its half of
// read_hf_config(), of building a folder's model and of write_hf_folder()
// (model/lm/hf_checkpoint.h). A family with hf_architectures fills in all
// three; the others leave them empty.
struct HfAdapter {
  // config.json (`config`, parsed from `file`) of one of the family's
  // architectures -> its config; `context` > 0 is the window to run.
  // UsageError naming the field for what the family does not run.
  std::function<HfModelConfig(
      const nlohmann::json& config,
      const std::string& architecture,
      std::int64_t context,
      const std::filesystem::path& file)>
      read;
  // The model a config from `read` describes, with fresh weights.
  std::function<std::shared_ptr<LanguageModel>(const HfModelConfig&)> make;
  // config.json and the weights as transformers names them, when `model`
  // is of this family; nullopt when it is not.
  std::function<std::optional<HfFolderFiles>(const LanguageModel& model)> write;
};

struct ModelFamilyEntry {
  ModelFamilyEntry(ModelFamily family, std::string title, std::string about)
      : family(family), title(std::move(title)), about(std::move(about)) {}

  ModelFamily family = ModelFamily::Unknown;
  std::string title; // "GPT", "Llama family", ...
  std::string about; // one line: what the family is
  std::vector<NamedModel> sizes; // in the order --help lists them
  // A --model prefix naming a file or folder ("hf:", "torchscript:"), and
  // the form shown in the help ("hf:DIR"); empty for a family of sizes.
  std::string prefix;
  std::string form;
  std::vector<HfArchitecture> hf_architectures;
  std::vector<std::string> lora_targets; // the projections, module order
  // What --activation-checkpointing recomputes in this family, one line
  // ("none": the family refuses every other mode).
  std::string checkpointing;
  // Builds the model `options` names (`kind`, of this family, is what
  // options.name names; make_model() has validated them), with fresh
  // weights.
  std::function<std::shared_ptr<Model>(
      const ModelOptions& options,
      const ModelKind& kind)>
      make;
  // A language model's options with its shape in full (layers, heads,
  // width, context, vocabulary: what config.json and checkpoints record),
  // from the size `kind` names and the fields set; UsageError for fields
  // that do not apply. Empty for families that are not language models.
  std::function<
      ModelOptions(const ModelOptions& options, const ModelKind& kind)>
      resolve;
  HfAdapter hf;
};

// Every family, in the order --model's help lists them: image classifiers,
// GPT, the Llama family, Hugging Face folders, TorchScript exports.
const std::vector<ModelFamilyEntry>& model_families();

// The entry of `family`; std::out_of_range for Unknown.
const ModelFamilyEntry& family_entry(ModelFamily family);

// The named size called `name` and its family's entry; both null when no
// family has a size of that name (a prefixed form, a user's own model, a
// typo).
struct FoundModel {
  const ModelFamilyEntry* family = nullptr;
  const NamedModel* size = nullptr;
};
FoundModel find_named_model(const std::string& name);

// Every family's Hugging Face architectures, in the families' order.
std::vector<std::string> hf_architecture_names();

// The family whose hf_architectures hold `architecture`; null for none.
const ModelFamilyEntry* family_of_hf_architecture(
    const std::string& architecture);

// --model's help, written from the entries: every named size by family,
// then the prefixed forms.
std::string model_help();

// Each family's LoRA projections ("GPT: c_attn,c_proj,c_fc; Llama family:
// q_proj,..."): --lora-targets' help.
std::string lora_targets_help();

// What activation checkpointing recomputes in each family ("image
// classifiers: ...; GPT: ..."): --activation-checkpointing's help.
std::string checkpointing_help();

// Every named size and its shape, one line each ("  gpt-nano  4 layers,
// ..."): `train --help`'s list of models.
std::string model_sizes_help();

} // namespace hotloop::model
