#pragma once
// LoRA (Hu et al., 2021): the language model's projections frozen, each
// targeted one given a trainable low-rank update,
//   y = x W^T + b + (alpha / r) * dropout(x) A^T B^T,   A: (r, in), B: (out, r)
// with A uniform in +-1/sqrt(in) (PEFT's kaiming_uniform(a=sqrt(5))) and B
// zero, so training starts from the base model exactly. The adapters are
// named as PEFT names them (`...q_proj.lora_A.weight`), and a PEFT adapter
// folder (adapter_config.json + adapter_model.safetensors) is read and
// written here: `peft.PeftModel.from_pretrained` loads what hotloop trains.

#include <cstdint>
#include <string>
#include <vector>

#include "hotloop/model/lm/lora_options.h"
#include "hotloop/model/weights.h"

namespace hotloop::model {

class LanguageModel;

// The names of the model's projections LoRA can adapt, in module order.
std::vector<std::string> lora_candidates(LanguageModel& model);

// Adds adapters to the targeted projections (on the base weights' device) and
// freezes every other parameter. Returns the adapted projections' names.
// UsageError for a target that names no projection (the message lists them)
// or a rank past a projection's smaller side.
std::vector<std::string> add_lora(
    LanguageModel& model,
    const LoraOptions& options);

// The adapters' weights by the model's names (`...lora_A.weight`).
StateDict lora_state(LanguageModel& model);

// Copies `weights` (by the model's names, as lora_state gives them) into
// the model's adapters. DataError naming `source` when a name is not one of
// the model's adapters, a shape differs, or an adapter is left without one.
void load_lora_weights(
    LanguageModel& model,
    const StateDict& weights,
    const std::string& source);

// W += (alpha / r) B A in every adapted projection, in float32, and the
// adapters removed: the model is then a plain one, as PEFT's
// merge_and_unload() leaves it. Returns how many projections were merged.
std::size_t merge_lora(LanguageModel& model);

// Frozen projection weights stored in `dtype` (bfloat16 for a bf16 run: half
// the base's memory; the adapters stay float32). Returns the bytes saved.
std::size_t store_frozen_projections(
    LanguageModel& model,
    at::ScalarType dtype);

// What LoRA changes in the 6N training FLOPs per token: the frozen matrices
// (projections and the output layer) skip their weight gradients (-2 per
// weight), the adapters add their own forward and backward (+6 per weight).
double lora_flops_per_token_change(LanguageModel& model);

// A PEFT adapter folder.
struct PeftAdapter {
  LoraOptions options;
  std::string base; // base_model_name_or_path
  StateDict weights; // by the model's names (PEFT's "base_model.model." off)
};

// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors for the
// model's adapters. `base` is recorded as base_model_name_or_path.
// `fan_in_fan_out`: the base stores its weights (in, out) (GPT-2's Conv1D).
void write_peft_adapter(
    const std::string& dir,
    LanguageModel& model,
    const LoraOptions& options,
    const std::string& base,
    bool fan_in_fan_out);

// Reads a PEFT LoRA adapter folder. ConfigError for what hotloop cannot
// apply (another PEFT method, DoRA, rsLoRA, per-module ranks, trained
// biases or modules_to_save); DataError for a missing or corrupt file.
PeftAdapter read_peft_adapter(const std::string& dir);

// Whether DIR holds adapter_config.json.
bool is_peft_adapter(const std::string& dir);

} // namespace hotloop::model
