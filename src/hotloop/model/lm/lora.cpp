#include "hotloop/model/lm/lora.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/model/lm/language_model.h"
#include "json_file.h"
#include "peft_config.h"
#include "projection.h"

namespace hotloop::model {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// PEFT's names: the model inside PeftModel (base_model) inside LoraModel.
constexpr std::string_view kPeftPrefix = "base_model.model.";

std::vector<std::pair<std::string, lm::ProjectionImpl*>> projections(
    LanguageModel& model) {
  std::vector<std::pair<std::string, lm::ProjectionImpl*>> out;
  for (const auto& m : model.named_modules("", false)) {
    if (auto* p = dynamic_cast<lm::ProjectionImpl*>(m.value().get())) {
      out.emplace_back(m.key(), p);
    }
  }
  return out;
}

// PEFT's rule for a list of target_modules: the whole name, or its end
// after a dot.
bool targeted(
    const std::string& name,
    const std::vector<std::string>& targets) {
  if (targets.empty()) {
    return true;
  }
  return std::any_of(targets.begin(), targets.end(), [&](const auto& t) {
    return name == t || name.ends_with("." + t);
  });
}

std::string last_part(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

} // namespace

std::vector<std::string> lora_candidates(LanguageModel& model) {
  std::vector<std::string> names;
  for (const auto& [name, p] : projections(model)) {
    names.push_back(name);
  }
  return names;
}

std::vector<std::string> add_lora(
    LanguageModel& model,
    const LoraOptions& options) {
  if (!options.enabled()) {
    return {};
  }
  if (options.dropout < 0 || options.dropout >= 1) {
    throw UsageError(
        fmt::format("--lora-dropout {}: must be in [0, 1)", options.dropout));
  }
  const auto all = projections(model);
  for (const std::string& t : options.targets) {
    const bool found = std::any_of(all.begin(), all.end(), [&](const auto& p) {
      return targeted(p.first, {t});
    });
    if (!found) {
      std::set<std::string> kinds;
      for (const auto& p : all) {
        kinds.insert(last_part(p.first));
      }
      throw UsageError(
          fmt::format(
              "LoRA target '{}': no projection of this model is named so", t),
          fmt::format(
              "its projections: {} (or a longer name ending in one)",
              fmt::join(kinds, ",")));
    }
  }
  // Every check before anything changes.
  for (const auto& [name, p] : all) {
    if (targeted(name, options.targets) &&
        options.rank > std::min(p->in_features(), p->out_features())) {
      throw UsageError(fmt::format(
          "LoRA rank {} is more than {}'s smaller side ({} x {}): nothing is low-rank there",
          options.rank,
          name,
          p->out_features(),
          p->in_features()));
    }
  }
  {
    at::NoGradGuard no_grad;
    for (auto& p : model.parameters()) {
      p.set_requires_grad(false);
    }
  }
  std::vector<std::string> adapted;
  for (const auto& [name, p] : all) {
    if (targeted(name, options.targets)) {
      p->add_lora(options.rank, options.scale(), options.dropout);
      adapted.push_back(name);
    }
  }
  return adapted;
}

StateDict lora_state(LanguageModel& model) {
  StateDict out;
  for (const auto& [name, p] : projections(model)) {
    if (p->has_lora()) {
      out.emplace_back(name + ".lora_A.weight", p->lora_a());
      out.emplace_back(name + ".lora_B.weight", p->lora_b());
    }
  }
  return out;
}

void load_lora_weights(
    LanguageModel& model,
    const StateDict& weights,
    const std::string& source) {
  StateDict mine = lora_state(model);
  std::set<std::string> filled;
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : weights) {
    auto it = std::find_if(mine.begin(), mine.end(), [&](const auto& e) {
      return e.first == name;
    });
    if (it == mine.end()) {
      throw DataError(
          fmt::format(
              "{}: '{}' is not one of this model's LoRA adapters",
              source,
              name),
          "the adapter was trained on another model or with other --lora-targets: give the base and targets it was trained with");
    }
    if (it->second.sizes() != t.sizes()) {
      throw DataError(fmt::format(
          "{}: '{}' is [{}] but the model's is [{}] (another rank or model size)",
          source,
          name,
          fmt::join(t.sizes(), ", "),
          fmt::join(it->second.sizes(), ", ")));
    }
    it->second.copy_(t);
    filled.insert(name);
  }
  for (const auto& [name, t] : mine) {
    if (!filled.contains(name)) {
      throw DataError(
          fmt::format("{}: no weights for the adapter '{}'", source, name));
    }
  }
}

std::size_t merge_lora(LanguageModel& model) {
  std::size_t n = 0;
  for (const auto& [name, p] : projections(model)) {
    if (p->has_lora()) {
      p->merge_lora();
      ++n;
    }
  }
  return n;
}

std::size_t store_frozen_projections(
    LanguageModel& model,
    at::ScalarType dtype) {
  std::size_t saved = 0;
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : projections(model)) {
    for (at::Tensor* t : {&p->weight, &p->bias}) {
      if (t->defined() && !t->requires_grad() && t->scalar_type() != dtype) {
        const std::size_t before = t->nbytes();
        t->set_data(t->to(dtype));
        saved += before - t->nbytes();
      }
    }
  }
  return saved;
}

double lora_flops_per_token_change(LanguageModel& model) {
  double frozen = 0;
  double adapters = 0;
  for (const auto& [name, p] : projections(model)) {
    if (!p->weight.requires_grad()) {
      frozen += static_cast<double>(p->weight.numel());
    }
    if (p->has_lora()) {
      adapters +=
          static_cast<double>(p->lora_a().numel() + p->lora_b().numel());
    }
  }
  // The output layer: its own matrix, or the tied embedding.
  const auto params = model.named_parameters();
  for (const char* name :
       {"lm_head.weight",
        "transformer.wte.weight",
        "model.embed_tokens.weight"}) {
    if (const at::Tensor* w = params.find(name)) {
      if (!w->requires_grad()) {
        frozen += static_cast<double>(w->numel());
      }
      break;
    }
  }
  return 6 * adapters - 2 * frozen;
}

void write_peft_adapter(
    const std::string& dir,
    LanguageModel& model,
    const LoraOptions& options,
    const std::string& base,
    bool fan_in_fan_out) {
  StateDict weights;
  std::set<std::string> kinds;
  for (const auto& [name, t] : lora_state(model)) {
    weights.emplace_back(
        std::string(kPeftPrefix) + name,
        t.detach().to(at::kCPU, at::kFloat).contiguous());
    // "…q_proj.lora_A.weight" -> "q_proj"
    const std::string module = name.substr(0, name.rfind(".lora_"));
    kinds.insert(last_part(module));
  }
  if (weights.empty()) {
    throw UsageError("this model has no LoRA adapters to write");
  }
  std::vector<std::string> targets = options.targets;
  if (targets.empty()) {
    targets.assign(kinds.begin(), kinds.end());
  }
  const json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base},
      {"r", options.rank},
      {"lora_alpha", options.alpha},
      {"lora_dropout", options.dropout},
      {"target_modules", targets},
      {"fan_in_fan_out", fan_in_fan_out},
      {"bias", "none"},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"rank_pattern", json::object()},
      {"alpha_pattern", json::object()},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"inference_mode", true}};
  fs::create_directories(dir);
  write_weights(
      (fs::path(dir) / "adapter_model.safetensors").string(),
      weights,
      {{"format", "pt"}});
  const fs::path config_file = fs::path(dir) / "adapter_config.json";
  std::ofstream out(config_file);
  out << config.dump(2) << "\n";
  if (!out.flush()) {
    throw DataError(fmt::format("{}: cannot be written", config_file.string()));
  }
}

bool is_peft_adapter(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "adapter_config.json", ec);
}

PeftAdapter read_peft_adapter(const std::string& dir) {
  const fs::path file = fs::path(dir) / "adapter_config.json";
  PeftConfig config = read_peft_config(read_json_object(file), file);
  PeftAdapter out{std::move(config.options), std::move(config.base), {}};
  const fs::path weights = fs::path(dir) / "adapter_model.safetensors";
  for (auto& [name, t] : read_weights(weights.string())) {
    if (!name.starts_with(kPeftPrefix)) {
      throw DataError(fmt::format(
          "{}: tensor '{}' does not start with '{}' as PEFT's names do",
          weights.string(),
          name,
          kPeftPrefix));
    }
    out.weights.emplace_back(name.substr(kPeftPrefix.size()), std::move(t));
  }
  return out;
}

} // namespace hotloop::model
