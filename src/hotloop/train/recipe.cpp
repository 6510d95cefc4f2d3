#include "hotloop/train/recipe.h"

#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "hotloop/model/exported.h"
#include "hotloop/model/gpt.h"

namespace hotloop::train {

namespace {

// The options a recipe may set, by flag name.
using Setter = std::function<void(TrainerOptions&, const std::string&)>;
const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> s = {
      {"optimizer",
       [](TrainerOptions& o, const std::string& v) {
         o.optimizer.kind = parse_optimizer(v);
       }},
      {"lr",
       [](TrainerOptions& o, const std::string& v) {
         o.schedule.lr = std::stod(v);
       }},
      {"schedule",
       [](TrainerOptions& o, const std::string& v) {
         o.schedule.kind = parse_schedule(v);
       }},
      {"momentum",
       [](TrainerOptions& o, const std::string& v) {
         o.optimizer.momentum = std::stod(v);
       }},
      {"nesterov",
       [](TrainerOptions& o, const std::string& v) {
         o.optimizer.nesterov = v == "true";
       }},
      {"weight-decay",
       [](TrainerOptions& o, const std::string& v) {
         o.optimizer.weight_decay = std::stod(v);
       }},
      {"beta2",
       [](TrainerOptions& o, const std::string& v) {
         o.optimizer.beta2 = std::stod(v);
       }},
      {"warmup-steps",
       [](TrainerOptions& o, const std::string& v) {
         o.schedule.warmup_steps = std::stoll(v);
       }},
      {"epochs",
       [](TrainerOptions& o, const std::string& v) {
         o.epochs = std::stoll(v);
       }},
      {"min-lr",
       [](TrainerOptions& o, const std::string& v) {
         o.schedule.min_lr = std::stod(v);
       }},
      {"clip-grad-norm",
       [](TrainerOptions& o, const std::string& v) {
         o.clip_grad_norm = std::stod(v);
       }},
      {"label-smoothing",
       [](TrainerOptions& o, const std::string& v) {
         o.label_smoothing = std::stod(v);
       }},
      {"augment", [](TrainerOptions& o, const std::string& v) {
         o.loader.augment =
             v == "none" ? data::Augment::None : data::Augment::Default;
       }}};
  return s;
}

// nanoGPT's and llm.c's GPT-2 settings: AdamW with beta2 0.95 and weight
// decay 0.1 (on matrices only: Model::decays), a linear warm-up then cosine
// down to a tenth, gradients clipped at norm 1.
Recipe gpt_recipe(
    const std::string& model,
    std::optional<OptimizerKind> optimizer) {
  Recipe r;
  r.model = model;
  const bool small = !model.starts_with("gpt2");
  const OptimizerKind kind = optimizer.value_or(OptimizerKind::AdamW);
  r.values.push_back({"optimizer", to_string(kind)});
  if (kind == OptimizerKind::AdamW) {
    // gpt-nano: measured on text:fortunes (docs/language-models.md);
    // gpt-mini: nanoGPT's character-level Shakespeare; gpt2*: GPT-3's table.
    const double lr = model == "gpt-nano"
        ? 1e-2
        : (model == "gpt-mini" ? 1e-3 : (model == "gpt2" ? 6e-4 : 3e-4));
    r.values.push_back({"lr", fmt::format("{:g}", lr)});
    r.values.push_back({"min-lr", fmt::format("{:g}", lr / 10)});
    r.values.push_back({"beta2", "0.95"});
    r.values.push_back({"weight-decay", "0.1"});
  }
  r.values.push_back({"schedule", "cosine"});
  r.values.push_back({"warmup-steps", small ? "50" : "700"});
  r.values.push_back({"clip-grad-norm", "1"});
  if (small) {
    r.values.push_back({"epochs", "3"});
  }
  return r;
}

} // namespace

Recipe recipe_for(
    const std::string& model,
    std::int64_t batch,
    std::optional<OptimizerKind> optimizer) {
  Recipe r;
  r.model = model;
  if (model::is_gpt(model)) {
    return gpt_recipe(model, optimizer);
  }
  const bool resnet = model.starts_with("resnet");
  const bool exported = model::is_exported(model);
  if (!resnet && !exported && model != "mlp" && model != "cnn-small") {
    return r;
  }
  const OptimizerKind kind =
      optimizer.value_or(resnet ? OptimizerKind::Sgd : OptimizerKind::AdamW);
  r.values.push_back({"optimizer", to_string(kind)});
  if (kind == OptimizerKind::Sgd) {
    r.values.push_back({"momentum", "0.9"});
    r.values.push_back({"nesterov", "true"});
    r.values.push_back(
        {"lr", fmt::format("{:g}", 0.1 * static_cast<double>(batch) / 128)});
    r.values.push_back({"weight-decay", "5e-4"});
  } else {
    r.values.push_back({"lr", model == "cnn-small" ? "3e-3" : "1e-3"});
  }
  r.values.push_back({"schedule", "onecycle"});
  if (resnet) {
    r.values.push_back({"label-smoothing", "0.1"});
  } else if (!exported) {
    r.values.push_back({"augment", "none"});
  }
  return r;
}

std::vector<std::string> apply_recipe(
    const Recipe& recipe,
    TrainerOptions& o,
    const std::set<std::string>& given) {
  std::vector<std::string> set;
  for (const auto& [key, value] : recipe.values) {
    if (given.contains(key)) {
      continue;
    }
    // Plain SGD asked for (--momentum 0): no Nesterov momentum on top.
    if (key == "nesterov" && given.contains("momentum") &&
        o.optimizer.momentum == 0) {
      continue;
    }
    const auto it = setters().find(key);
    if (it == setters().end()) {
      throw std::logic_error("recipe: no setter for '" + key + "'");
    }
    it->second(o, value);
    set.push_back(key);
  }
  return set;
}

} // namespace hotloop::train
