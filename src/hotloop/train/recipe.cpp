#include "hotloop/train/recipe.h"

#include <algorithm>
#include <stdexcept>

#include <ATen/Context.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/model/family.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/train/device.h"
#include "hotloop/train/option_table.h"
#include "hotloop/train/precision.h"

namespace hotloop::train {

namespace {

// The named size's recipe (its family's entry, model/family.h); a model
// without one (a Hugging Face folder trained from scratch, a user's own):
// a language model AdamW at 3e-4, anything else 1e-3.
model::SizeRecipe size_recipe(const std::string& model, bool language_model) {
  const model::FoundModel found = model::find_named_model(model);
  if (found.size != nullptr) {
    return found.size->recipe;
  }
  model::SizeRecipe r;
  r.lr = language_model ? 3e-4 : 1e-3;
  return r;
}

// Fine-tuning a language model's pretrained weights (--init, e.g. a Hugging
// Face folder's): AdamW at 2e-5 (the usual full fine-tuning rate; LoRA's
// adapters: 2e-4, as the LoRA and QLoRA papers' recipes), no weight decay, a
// short warm-up, cosine down to a tenth, gradients clipped at norm 1.
Recipe fine_tune_recipe(
    const std::string& model,
    std::optional<OptimizerKind> optimizer,
    bool lora) {
  Recipe r;
  r.model = model;
  const OptimizerKind kind = optimizer.value_or(OptimizerKind::AdamW);
  r.values.push_back({"optimizer", to_string(kind)});
  if (kind == OptimizerKind::AdamW) {
    r.values.push_back({"lr", lora ? "2e-04" : "2e-05"});
    r.values.push_back({"min-lr", lora ? "2e-05" : "2e-06"});
    r.values.push_back({"weight-decay", "0"});
  }
  r.values.push_back({"schedule", "cosine"});
  r.values.push_back({"warmup-steps", "20"});
  r.values.push_back({"clip-grad-norm", "1"});
  return r;
}

// nanoGPT's and llm.c's GPT-2 settings: AdamW with beta2 0.95 and weight
// decay 0.1 (on matrices only: Model::decays), a linear warm-up then cosine
// down to a tenth, gradients clipped at norm 1. The Llama family's named
// sizes train from scratch the same way.
Recipe lm_recipe(
    const std::string& model,
    std::optional<OptimizerKind> optimizer,
    bool pretrained,
    bool lora) {
  if (pretrained) {
    return fine_tune_recipe(model, optimizer, lora);
  }
  Recipe r;
  r.model = model;
  const model::SizeRecipe size = size_recipe(model, true);
  const bool small = size.small;
  const OptimizerKind kind = optimizer.value_or(OptimizerKind::AdamW);
  r.values.push_back({"optimizer", to_string(kind)});
  if (kind == OptimizerKind::AdamW) {
    const double lr = size.lr;
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

Recipe recipe_for(const RecipeFor& what) {
  const std::string& model = what.model;
  const std::int64_t batch = what.batch;
  const std::optional<OptimizerKind> optimizer = what.optimizer;
  Recipe r;
  r.model = model;
  const model::ModelKind model_is = model::model_kind(model);
  if (model_is.language_model()) {
    r = lm_recipe(model, optimizer, what.pretrained, what.lora);
    // bf16 where the GPU has it (fp16 would need loss scaling, and fp32
    // leaves the tensor cores and the fused attention kernels idle).
    if (what.gpu_precision == Precision::Bf16) {
      r.values.push_back({"precision", "bf16"});
    }
    return r;
  }
  const bool exported = model_is.exported();
  if (model_is.family != model::ModelFamily::Image && !exported) {
    return r;
  }
  const model::SizeRecipe size = size_recipe(model, false);
  const bool resnet = size.sgd;
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
    r.values.push_back({"lr", fmt::format("{:g}", size.lr)});
  }
  r.values.push_back({"schedule", "onecycle"});
  if (resnet) {
    r.values.push_back({"label-smoothing", "0.1"});
  } else if (!exported) {
    r.values.push_back({"augment", "none"});
  }
  return r;
}

namespace {

std::string as_flags(const Recipe& r) {
  std::string flags;
  for (const RecipeValue& v : r.values) {
    flags += fmt::format(" --{} {}", v.key, v.value);
  }
  return flags;
}

} // namespace

std::string recipes_help(std::int64_t batch) {
  // Sizes with the same values share a line, in the families' order.
  std::vector<std::pair<std::vector<std::string>, std::string>> lines;
  for (const model::ModelFamilyEntry& f : model::model_families()) {
    for (const model::NamedModel& size : f.sizes) {
      const std::string flags = as_flags(recipe_for({size.name, batch}));
      const auto same =
          std::find_if(lines.begin(), lines.end(), [&](const auto& l) {
            return l.second == flags;
          });
      if (same != lines.end()) {
        same->first.push_back(size.name);
      } else {
        lines.push_back({{size.name}, flags});
      }
    }
  }
  std::string out;
  for (const auto& [names, flags] : lines) {
    out += fmt::format("  {}:{}\n", fmt::join(names, ", "), flags);
  }
  // The other optimizer than a model's own: that optimizer's values.
  out += fmt::format(
      "  a ResNet with --optimizer adamw:{}\n",
      as_flags(recipe_for({"resnet18", batch, OptimizerKind::AdamW})));
  out += fmt::format(
      "  cnn-small with --optimizer sgd:{}\n",
      as_flags(recipe_for({"cnn-small", batch, OptimizerKind::Sgd})));
  const std::string folder = "hf:DIR";
  out += fmt::format(
      "  a language model with --init (pretrained weights):{}\n",
      as_flags(recipe_for({folder, batch, std::nullopt, true})));
  out += fmt::format(
      "  ... and --lora-rank:{}\n",
      as_flags(recipe_for({folder, batch, std::nullopt, true, true})));
  return out;
}

std::optional<Precision> gpu_mixed_precision(const std::string& device) {
  // --device cuda without CUDA: no GPU to ask (the trainer says why it
  // cannot run; --print-config still prints).
  if (!at::hasCUDA()) {
    return std::nullopt;
  }
  const c10::Device d = resolve_device(device);
  return d.is_cuda() ? std::optional(mixed_precision_for(d)) : std::nullopt;
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
    const TrainerOption* option = find_trainer_option(key);
    if (option == nullptr || !option->recipe) {
      throw std::logic_error(
          "recipe: '" + key + "' is not an option a recipe may set");
    }
    option->set(o, value);
    set.push_back(key);
  }
  return set;
}

} // namespace hotloop::train
