#pragma once
// Which language model a weight file holds, for the commands that load one
// (generate, predict, weights export-hf): the flags the user gave, then a
// Hugging Face folder's own config.json (--weights DIR: the model hf:DIR), a
// PEFT adapter folder's base (its adapter_config.json's
// base_model_name_or_path, a Hugging Face folder), then the run's config.json
// next to the file (RUN/config.json for RUN/checkpoints/step-N.safetensors),
// then the named size.

#include <optional>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/model.h"
#include "hotloop/train/options.h"
#include "hotloop/train/precision.h"

namespace hotloop::cli {

// Adds --layers --heads --width --context --vocab (and --model unless the
// command has its own), filling `m`.
void add_lm_flags(
    CLI::App* cmd,
    model::ModelOptions& m,
    bool with_model = true);

// The model's options with every size field resolved
// (model::resolve_language_model). UsageError when nothing says which model
// it is, or it is not a language model.
model::ModelOptions resolve_lm(
    model::ModelOptions flags,
    const std::string& weights,
    const std::set<std::string>& given);

// The model with `weights` loaded: a weight file or checkpoint (a LoRA run's
// holds its adapters: the base comes from the run's --init, or its hf:DIR), a
// Hugging Face folder, or a PEFT adapter folder (its base folder's weights,
// then the adapters).
std::shared_ptr<model::LanguageModel> load_lm(
    const model::ModelOptions& options,
    const std::string& weights);

// The precision the model behind `weights` trained in: its run's
// config.json (a checkpoint's, a run's adapter folder's), else a Hugging
// Face folder's dtype (transformers' "dtype" or "torch_dtype": bfloat16,
// float16, float32), the base folder's for a PEFT adapter; nullopt when
// nothing says.
std::optional<train::Precision> trained_precision(const std::string& weights);

// What predict and generate run `weights` in on `device`, with --precision
// `flag` (auto, or a precision: train/precision.h's inference_precision),
// its TF32 switches set. UsageError for a bad word or fp16 on the CPU.
train::InferencePrecision inference_precision_of(
    const std::string& flag,
    const std::string& weights,
    const c10::Device& device);

// Adds --precision (auto, fp32, tf32, bf16, fp16) filling `flag`.
void add_inference_precision_flag(CLI::App* cmd, std::string& flag);

// The tokenizer for a weight file: `spec` when given ("bytes", "bpe:DIR"),
// else the run's own (RUN/tokenizer/, kept by `hotloop train` from token
// data packed with a BPE tokenizer; a Hugging Face folder's tokenizer.json),
// else bytes. UsageError when that is bytes but the model's vocabulary is
// larger than 256.
data::Tokenizer resolve_tokenizer(
    const std::string& spec,
    const std::string& weights,
    const model::ModelOptions& model);

} // namespace hotloop::cli
