#include "peft_config.h"

#include "hf_configs.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A config value that turns something on: not null, false, "" or empty.
bool is_set(const json& v) {
  if (v.is_null()) {
    return false;
  }
  if (v.is_boolean()) {
    return v.get<bool>();
  }
  if (v.is_string()) {
    return !v.get<std::string>().empty();
  }
  return !(v.is_object() || v.is_array()) || !v.empty();
}

} // namespace

PeftConfig read_peft_config(const json& j, const fs::path& file) {
  auto refuse = [&](const std::string& what, const std::string& fix) {
    throw ConfigError(
        fmt::format("{}: {}: hotloop cannot apply it", file.string(), what),
        fix);
  };
  // PEFT writes null for what it does not know (the base of a model built
  // from a config): null reads as absent.
  auto text = [&](const char* key, const std::string& absent) {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? absent : it->get<std::string>();
  };
  PeftConfig out;
  try {
    const std::string type = text("peft_type", "");
    if (type != "LORA") {
      refuse(
          fmt::format("peft_type \"{}\"", type),
          "hotloop reads LoRA adapters (peft_type LORA)");
    }
    for (const char* flag : {"use_dora", "use_rslora"}) {
      if (j.value(flag, false)) {
        refuse(
            fmt::format("{} is true", flag), "train the adapter as plain LoRA");
      }
    }
    for (const char* pattern : {"rank_pattern", "alpha_pattern"}) {
      if (j.contains(pattern) && !j[pattern].is_null() && !j[pattern].empty()) {
        refuse(
            fmt::format(
                "{} gives some modules their own rank or alpha", pattern),
            "hotloop adapters share one rank and alpha");
      }
    }
    // What changes the forward or the base, or adds tensors hotloop does
    // not hold: refused when set (null, false and empty pass).
    for (const char* key :
         {"alora_invocation_tokens",
          "arrow_config",
          "use_bdlora",
          "velora_config",
          "monteclora_config",
          "kasa_config",
          "layer_replication",
          "lora_bias",
          "exclude_modules",
          "target_parameters",
          "use_qalora",
          "trainable_token_indices",
          "lora_ga_config",
          "corda_config",
          "eva_config",
          "loftq_config"}) {
      const auto it = j.find(key);
      if (it != j.end() && is_set(*it)) {
        refuse(
            fmt::format("{} is set", key),
            "hotloop applies plain LoRA adapters (A and B per targeted projection)");
      }
    }
    if (const auto init = j.find("init_lora_weights"); init != j.end() &&
        init->is_string() && init->get<std::string>() != "gaussian") {
      refuse(
          fmt::format(
              "init_lora_weights \"{}\" (the adapter is relative to a modified base)",
              init->get<std::string>()),
          "convert it to plain LoRA with PEFT first (path_initial_model_for_weight_conversion)");
    }
    if (text("bias", "none") != "none") {
      refuse("bias is trained", "hotloop trains the low-rank matrices only");
    }
    for (const char* extra : {"modules_to_save", "layers_to_transform"}) {
      if (j.contains(extra) && !j[extra].is_null()) {
        refuse(
            fmt::format("{} is set", extra),
            "hotloop adapts every layer's targeted projections and saves nothing else");
      }
    }
    out.options.rank = lm::field<std::int64_t>(j, "r", 0, file); // 0: refused
    out.options.alpha = j.at("lora_alpha").get<double>();
    out.options.dropout = j.value("lora_dropout", 0.0);
    const json& targets = j.at("target_modules");
    if (targets.is_string()) {
      if (targets.get<std::string>() != "all-linear") {
        refuse(
            "target_modules is a regular expression",
            "list the module names instead");
      }
    } else {
      out.options.targets = targets.get<std::vector<std::string>>();
    }
    out.base = text("base_model_name_or_path", "");
  } catch (const json::exception& e) {
    throw DataError(fmt::format("{}: {}", file.string(), e.what()));
  }
  if (out.options.rank < 1) {
    throw DataError(fmt::format("{}: r must be at least 1", file.string()));
  }
  if (!(out.options.dropout >= 0 && out.options.dropout < 1)) {
    throw DataError(fmt::format(
        "{}: lora_dropout {} is not a probability in [0, 1)",
        file.string(),
        out.options.dropout));
  }
  return out;
}

} // namespace hotloop::model
