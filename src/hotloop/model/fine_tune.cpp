#include "hotloop/model/fine_tune.h"

#include <fnmatch.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/model/lm/hf_checkpoint.h"

namespace hotloop::model {

namespace {

bool in_head(const std::string& name, const std::string& head) {
  return name.starts_with(head + ".");
}

} // namespace

InitResult load_initial_weights(Model& model, const InitOptions& options) {
  WeightFile weights;
  if (is_hf_folder(options.path)) {
    weights.tensors = read_hf_weights(options.path); // save_pretrained's
  } else if (options.read) {
    weights = options.read(options.path);
  } else {
    weights = read_weight_file(options.path);
  }
  StateDict file;
  if (const auto meta = weights.metadata.find("hotloop.checkpoint");
      meta != weights.metadata.end()) {
    const auto j = nlohmann::json::parse(meta->second, nullptr, false);
    // train/checkpoint_shards.h's kModelShardIndexKey (a layer above).
    if (j.is_object() && j.contains("model_shards")) {
      throw UsageError(
          fmt::format(
              "{} is a ZeRO stage-3 checkpoint: its blocks' weights are in the shard files beside it",
              options.path),
          fmt::format(
              "put it in one file with `hotloop weights consolidate {} OUT.safetensors` and use OUT",
              options.path));
    }
    // A training checkpoint: its model part.
    for (auto& [name, t] : weights.tensors) {
      if (name.starts_with("model/")) {
        file.emplace_back(name.substr(6), std::move(t));
      }
    }
  } else {
    file = std::move(weights.tensors);
  }
  model.adapt_weights(file);
  const std::string head = model.head_name();
  InitResult result;
  LoadOptions load;
  load.strict = options.strict;
  load.source = options.path;
  // The head differs in shape: a new classifier for new classes.
  const StateDict own = state_dict(model);
  for (const auto& [name, t] : own) {
    if (!in_head(name, head)) {
      continue;
    }
    for (const auto& [file_name, ft] : file) {
      if (file_name == name && ft.sizes() != t.sizes()) {
        result.head_replaced = true;
        result.file_classes = ft.dim() > 0 ? ft.size(0) : 0;
      }
    }
  }
  if (result.head_replaced) {
    load.skip_prefixes.push_back(head + ".");
  }
  result.report = load_state_dict(model, file, load);
  return result;
}

Freeze parse_freeze(const std::string& text) {
  if (text == "none") {
    return Freeze::None;
  }
  if (text == "backbone") {
    return Freeze::Backbone;
  }
  freeze_patterns(text); // checks them
  return Freeze::Patterns;
}

std::vector<std::string> freeze_patterns(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, comma - start));
    if (out.back().empty()) {
      throw UsageError(
          fmt::format("--freeze '{}': an empty pattern", text),
          "expected backbone, none, or comma-separated name globs such as 'features.*,classifier.0.*'");
    }
    start = comma + 1;
  }
  return out;
}

std::size_t freeze_matching(
    Model& model,
    const std::vector<std::string>& patterns) {
  std::size_t frozen = 0;
  for (const std::string& pattern : patterns) {
    std::size_t matched = 0;
    for (auto& p : model.named_parameters()) {
      if (fnmatch(pattern.c_str(), p.key().c_str(), 0) == 0) {
        frozen += p.value().requires_grad();
        p.value().set_requires_grad(false);
        ++matched;
      }
    }
    if (matched == 0) {
      const auto names = model.named_parameters().keys();
      throw UsageError(
          fmt::format(
              "--freeze '{}' matches no parameter of the model", pattern),
          fmt::format(
              "its parameters are named like {}{}",
              names.empty() ? std::string("(none)") : names.front(),
              names.size() > 1 ? ", " + names.back() : std::string()));
    }
  }
  return frozen;
}

void freeze_backbone(Model& model) {
  const std::string head = model.head_name();
  for (auto& p : model.named_parameters()) {
    if (!in_head(p.key(), head)) {
      p.value().set_requires_grad(false);
    }
  }
}

ParameterGroups parameter_groups(Model& model) {
  const std::string head = model.head_name();
  ParameterGroups groups;
  for (auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) {
      continue;
    }
    (in_head(p.key(), head) ? groups.head : groups.backbone)
        .push_back(p.value());
  }
  return groups;
}

} // namespace hotloop::model
