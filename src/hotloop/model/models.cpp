// make_model(): hotloop's models by name.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/model.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/model/script/exported.h"

namespace hotloop::model {

Checkpointing parse_checkpointing(const std::string& text) {
  return parse_named<Checkpointing>(
      kCheckpointingNames, text, "activation-checkpointing");
}

const char* to_string(Checkpointing mode) {
  return name_of<Checkpointing>(kCheckpointingNames, mode);
}

void Model::set_checkpointing(Checkpointing mode) {
  if (mode != Checkpointing::None) {
    throw UsageError(
        fmt::format(
            "--activation-checkpointing {}: this model has no stages to recompute",
            to_string(mode)),
        "use it with the ResNets, or --activation-checkpointing none");
  }
}

at::Tensor Model::objective(
    const ModelBatch& batch,
    const LossOptions& options) {
  if (!batch.rows.empty()) {
    throw UsageError(
        "this model takes one sequence a row, not rows packed with several examples",
        "pass --packing none (one example a row) or --packing wrap");
  }
  return loss(forward(batch.inputs), batch.targets, options);
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (const ModelFamilyEntry& f : model_families()) {
      for (const NamedModel& size : f.sizes) {
        n.push_back(size.name);
      }
    }
    return n;
  }();
  return kNames;
}

void ModelOptions::validate() const {
  const ModelKind kind = model_kind(name);
  if (kind.exported()) {
    exported_path(name); // names a file
  } else if (kind.hf_folder()) {
    resolve_language_model(*this, kind); // a folder hotloop can run
    return;
  } else if (!exported.head.empty()) {
    throw UsageError(
        fmt::format(
            "--head {}: only exported models take a head name", exported.head),
        fmt::format("{}'s head is fixed; drop --head", name));
  } else if (kind.family == ModelFamily::Unknown) {
    throw UsageError(
        fmt::format("--model {}: no such model", name),
        fmt::format("choose one of: {}", model_help()));
  }
  if (kind.language_model()) {
    resolve_language_model(*this, kind); // the image fields do not apply
    return;
  }
  if (image.num_classes < 1) {
    throw UsageError(
        fmt::format("--num-classes {}: must be at least 1", image.num_classes));
  }
  if (image.in_channels < 1) {
    throw UsageError(
        fmt::format("--in-channels {}: must be at least 1", image.in_channels));
  }
  if (image.size < 1) {
    throw UsageError(fmt::format("--size {}: must be at least 1", image.size));
  }
}

std::shared_ptr<Model> make_model(const ModelOptions& options) {
  options.validate();
  const ModelKind kind = model_kind(options.name);
  return family_entry(kind.family).make(options, kind);
}

ParameterCount count_parameters(const torch::nn::Module& module) {
  ParameterCount c;
  for (const auto& p : module.parameters()) {
    (p.requires_grad() ? c.trainable : c.frozen) += p.numel();
  }
  return c;
}

} // namespace hotloop::model
