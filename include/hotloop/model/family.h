#pragma once
// The model families, one entry each: what a family is called, its named
// sizes (each with its shape and the recipe it trains with), the form of
// --model that names a file or folder of it, the Hugging Face architectures
// it reads and writes, the projections LoRA adapts, what activation
// checkpointing recomputes and how it builds a model. --model's help, train
// --help's models and recipes, model_kind() and recipe_for() read these
// entries; a family's own folder (model/gpt/, model/llama/, model/image/,
// model/script/) fills its entry in (Hugging Face folders':
// model/lm/hf_checkpoint.cpp). docs/adding-a-model-family.md walks through
// adding one.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hotloop/model/model_kind.h"

namespace hotloop::model {

class Model; // model/model.h
struct ModelOptions;

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
  // Builds the model `options` names (options.name is of this family;
  // make_model() has validated them), with fresh weights.
  std::function<std::shared_ptr<Model>(const ModelOptions&)> make;
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
