#pragma once
// A PEFT adapter folder's adapter_config.json: what LoRA it holds, or why
// hotloop cannot apply it. No LibTorch here, so the fuzz target builds
// without it (model/lm/lora.h reads the folder's weights).

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "hotloop/model/lm/lora_options.h"

namespace hotloop::model {

struct PeftConfig {
  LoraOptions options;
  std::string base; // base_model_name_or_path
};

// `j`, read from `file`. ConfigError for what hotloop cannot apply (another
// PEFT method, DoRA, rsLoRA, per-module ranks, trained biases,
// modules_to_save, a regular expression of targets); DataError for a
// missing or mistyped field or a rank below 1.
PeftConfig read_peft_config(
    const nlohmann::json& j,
    const std::filesystem::path& file);

} // namespace hotloop::model
