#include "lm_options.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/lm/lora.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/train/checkpoint_shards.h"
#include "hotloop/train/run_folder.h"

namespace hotloop::cli {

namespace {

namespace fs = std::filesystem;

// The object `part` ("model", "options") of the run's config.json beside
// the file (RUN/model.safetensors) or its folder's (RUN/checkpoints/...).
std::optional<nlohmann::json> run_config(
    const std::string& weights,
    const char* part = "model") {
  for (const train::RunFolder& run : train::RunFolder::around(weights)) {
    if (std::optional<nlohmann::json> j = run.config_part(part)) {
      return j;
    }
  }
  return std::nullopt;
}

// The run's --init: the base a LoRA run's adapters were trained on.
std::string run_init(const std::string& weights) {
  const std::optional<nlohmann::json> options = run_config(weights, "options");
  return options ? options->value("init", std::string()) : std::string();
}

// A Hugging Face folder's dtype (transformers 5 writes "dtype", older
// versions "torch_dtype").
std::optional<train::Precision> folder_precision(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "config.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::nullopt;
  }
  for (const char* key : {"dtype", "torch_dtype"}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      continue;
    }
    const std::string dtype = *it;
    if (dtype == "bfloat16") {
      return train::Precision::Bf16;
    }
    if (dtype == "float16") {
      return train::Precision::Fp16;
    }
    if (dtype == "float32") {
      return train::Precision::Fp32;
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<train::Precision> trained_precision(const std::string& weights) {
  if (const std::optional<nlohmann::json> options =
          run_config(weights, "options")) {
    const auto it = options->find("precision");
    if (it != options->end() && it->is_string()) {
      for (const auto& [p, name] : train::kPrecisionNames) {
        if (it->get<std::string>() == name) {
          return p;
        }
      }
    }
  }
  if (model::is_peft_adapter(weights)) {
    return folder_precision(model::read_peft_adapter(weights).base);
  }
  if (model::is_hf_folder(weights)) {
    return folder_precision(weights);
  }
  return std::nullopt;
}

train::InferencePrecision inference_precision_of(
    const std::string& flag,
    const std::string& weights,
    const c10::Device& device) {
  const std::optional<train::Precision> asked = flag == "auto"
      ? std::nullopt
      : std::optional(train::parse_precision(flag));
  const train::InferencePrecision p = train::inference_precision(
      asked,
      trained_precision(weights),
      device.is_cuda() ? std::optional(train::mixed_precision_for(device))
                       : std::nullopt);
  train::configure_math_mode(p.precision, device);
  return p;
}

void add_inference_precision_flag(CLI::App* cmd, std::string& flag) {
  cmd->add_option(
         "--precision",
         flag,
         "A language model's precision: auto, fp32, tf32, bf16 (autocast) or fp16 (CUDA); auto: fp32 on the CPU, on a GPU the precision the model trained in (its run's config.json, a Hugging Face folder's dtype), else bf16 where the GPU has it")
      ->capture_default_str();
}

void add_lm_flags(CLI::App* cmd, model::ModelOptions& m, bool with_model) {
  if (with_model) {
    cmd->add_option(
        "--model",
        m.name,
        fmt::format(
            "Language model ({}, or hf:DIR); default: --weights' own config.json (a Hugging Face folder) or its run's",
            fmt::join(model::language_model_names(), ", ")));
  }
  cmd->add_option("--layers", m.lm.layers, "Default: the run's or the size's");
  cmd->add_option("--heads", m.lm.heads, "Default: the run's or the size's");
  cmd->add_option("--width", m.lm.width, "Default: the run's or the size's");
  cmd->add_option(
      "--context", m.lm.context, "Default: the run's or the size's");
  cmd->add_option("--vocab", m.lm.vocab, "Default: the run's or the size's");
}

model::ModelOptions resolve_lm(
    model::ModelOptions m,
    const std::string& weights,
    const std::set<std::string>& given) {
  if (model::is_peft_adapter(weights)) {
    const model::PeftAdapter adapter = model::read_peft_adapter(weights);
    if (!given.contains("model")) {
      if (!model::is_hf_folder(adapter.base)) {
        throw UsageError(
            fmt::format(
                "--weights {}: its base model, \"{}\", is not a Hugging Face folder here",
                weights,
                adapter.base),
            "pass the base with --model hf:DIR");
      }
      m.name = "hf:" + adapter.base;
    }
    m.lora = adapter.options;
  } else if (model::is_hf_folder(weights)) {
    if (!given.contains("model")) {
      m.name = "hf:" + weights;
    }
  } else if (const std::optional<nlohmann::json> saved = run_config(weights)) {
    if (!given.contains("model")) {
      m.name = saved->value("name", m.name);
    }
    for (auto [key, field] :
         {std::pair{"layers", &m.lm.layers},
          {"heads", &m.lm.heads},
          {"width", &m.lm.width},
          {"context", &m.lm.context},
          {"vocab", &m.lm.vocab}}) {
      if (!given.contains(key)) {
        *field = saved->value(key, *field);
      }
    }
    if (const auto lora = saved->find("lora");
        lora != saved->end() && lora->is_object()) {
      m.lora.rank = lora->value("rank", std::int64_t{0});
      m.lora.alpha = lora->value("alpha", m.lora.alpha);
      m.lora.dropout = lora->value("dropout", 0.0);
      m.lora.targets = lora->value("targets", std::vector<std::string>{});
    }
  }
  if (m.name.empty()) {
    throw UsageError(
        fmt::format(
            "--weights {}: no config.json beside it says which model it is",
            weights),
        "pass --model (and --layers/--heads/--width/--context/--vocab when not the named size's)");
  }
  const model::ModelKind kind = model::model_kind(m.name);
  if (!kind.language_model()) {
    throw UsageError(
        fmt::format("--model {}: this needs a language model", m.name),
        fmt::format(
            "one of {}, or hf:DIR",
            fmt::join(model::language_model_names(), ", ")));
  }
  return model::resolve_language_model(m, kind);
}

std::shared_ptr<model::LanguageModel> load_lm(
    const model::ModelOptions& options,
    const std::string& weights) {
  auto lm = model::make_language_model(options);
  const std::string folder = model::model_kind(options.name).folder();
  if (model::is_peft_adapter(weights)) {
    if (folder.empty()) {
      throw UsageError(
          fmt::format(
              "--weights {} is a LoRA adapter: its base must be a Hugging Face folder",
              weights),
          "pass --model hf:DIR (the folder the adapter was trained on)");
    }
    model::load_initial_weights(*lm, {folder, true, train::read_whole_weights});
    const model::PeftAdapter adapter = model::read_peft_adapter(weights);
    model::add_lora(*lm, adapter.options);
    model::load_lora_weights(*lm, adapter.weights, weights);
    return lm;
  }
  if (!options.lora.enabled()) {
    model::load_initial_weights(
        *lm, {weights, true, train::read_whole_weights});
    return lm;
  }
  // A LoRA run's weights and checkpoints hold its adapters: the base first,
  // from the run's --init (or the hf:DIR folder), then the adapters.
  std::string base = run_init(weights);
  if (base.empty()) {
    base = folder;
  }
  if (!base.empty()) {
    model::load_initial_weights(*lm, {base, true, train::read_whole_weights});
  }
  model::add_lora(*lm, options.lora);
  const model::InitResult r = model::load_initial_weights(
      *lm, {weights, false, train::read_whole_weights});
  std::vector<std::string> missing;
  for (const std::string& name : r.report.missing) {
    if (base.empty() || name.find(".lora_") != std::string::npos) {
      missing.push_back(name);
    }
  }
  if (!missing.empty() || !r.report.unexpected.empty() ||
      !r.report.mismatched.empty()) {
    throw DataError(
        fmt::format(
            "--weights {}: not the LoRA run's weights ({} missing{}, {} unexpected, {} mismatched)\n{}",
            weights,
            missing.size(),
            base.empty()
                ? fmt::format(
                      "; the run trained {} from scratch, so its base is not in any file",
                      options.name)
                : std::string(),
            r.report.unexpected.size(),
            r.report.mismatched.size(),
            model::describe(r.report)),
        "give the run's model.safetensors or a checkpoint of it, beside its config.json");
  }
  return lm;
}

data::Tokenizer resolve_tokenizer(
    const std::string& spec,
    const std::string& weights,
    const model::ModelOptions& m) {
  if (!spec.empty()) {
    return data::Tokenizer::parse(spec);
  }
  const std::string folder = model::model_kind(m.name).folder();
  if (!folder.empty()) {
    // A Hugging Face folder's own tokenizer.json.
    if (data::Tokenizer::dir_beside(folder)) {
      return data::Tokenizer::in_dir(folder);
    }
    throw UsageError(
        fmt::format("--weights {}: the folder has no tokenizer.json", folder),
        "pass --tokenizer hf:DIR (a tokenizer.json) or bpe:DIR");
  }
  for (const train::RunFolder& run : train::RunFolder::around(weights)) {
    const std::string kept = run.tokenizer();
    if (data::Tokenizer::dir_beside(kept) == kept) {
      return data::Tokenizer::in_dir(kept);
    }
  }
  const model::ModelOptions c = model::resolve_language_model(m);
  if (c.lm.vocab > 256) {
    throw UsageError(
        fmt::format(
            "--weights {}: the model's vocabulary is {} tokens, not bytes, and its run has no tokenizer/",
            weights,
            c.lm.vocab),
        "pass the tokenizer it was trained with: --tokenizer bpe:DIR (DIR/vocab.json + DIR/merges.txt)");
  }
  return data::Tokenizer::bytes();
}

} // namespace hotloop::cli
