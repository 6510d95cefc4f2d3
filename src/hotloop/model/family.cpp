// The registry of model families (hotloop/model/family.h): the list of
// entries, and what is asked of it by name.

#include "hotloop/model/family.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "families.h"

namespace hotloop::model {

const std::vector<ModelFamilyEntry>& model_families() {
  static const std::vector<ModelFamilyEntry> kFamilies = {
      image_family(),
      gpt_family(),
      llama_family(),
      hf_folder_family(),
      exported_family()};
  return kFamilies;
}

const ModelFamilyEntry& family_entry(ModelFamily family) {
  for (const ModelFamilyEntry& f : model_families()) {
    if (f.family == family) {
      return f;
    }
  }
  throw std::out_of_range("family_entry: a family with no entry");
}

FoundModel find_named_model(const std::string& name) {
  for (const ModelFamilyEntry& f : model_families()) {
    for (const NamedModel& size : f.sizes) {
      if (size.name == name) {
        return {&f, &size};
      }
    }
  }
  return {};
}

std::vector<std::string> hf_architecture_names() {
  std::vector<std::string> names;
  for (const ModelFamilyEntry& f : model_families()) {
    for (const HfArchitecture& a : f.hf_architectures) {
      names.push_back(a.name);
    }
  }
  return names;
}

const ModelFamilyEntry* family_of_hf_architecture(
    const std::string& architecture) {
  for (const ModelFamilyEntry& f : model_families()) {
    for (const HfArchitecture& a : f.hf_architectures) {
      if (a.name == architecture) {
        return &f;
      }
    }
  }
  return nullptr;
}

std::string model_help() {
  std::vector<std::string> parts;
  for (const ModelFamilyEntry& f : model_families()) {
    std::vector<std::string> names;
    for (const NamedModel& size : f.sizes) {
      names.push_back(size.name);
    }
    if (!names.empty()) {
      parts.push_back(fmt::format("{}: {}", f.title, fmt::join(names, ", ")));
    } else if (f.family == ModelFamily::HfFolder) {
      // The architectures are the families' that read them.
      parts.push_back(fmt::format(
          "{} ({}: {})",
          f.form,
          f.about,
          fmt::join(hf_architecture_names(), ", ")));
    } else {
      parts.push_back(fmt::format("{} ({})", f.form, f.about));
    }
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string lora_targets_help() {
  std::vector<std::string> parts;
  for (const ModelFamilyEntry& f : model_families()) {
    if (!f.lora_targets.empty()) {
      parts.push_back(
          fmt::format("{}: {}", f.title, fmt::join(f.lora_targets, ",")));
    }
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string checkpointing_help() {
  std::vector<std::string> parts;
  for (const ModelFamilyEntry& f : model_families()) {
    parts.push_back(fmt::format("{}: {}", f.title, f.checkpointing));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string model_sizes_help() {
  std::size_t width = 0;
  for (const ModelFamilyEntry& f : model_families()) {
    for (const NamedModel& size : f.sizes) {
      width = std::max(width, size.name.size());
    }
  }
  std::string out;
  for (const ModelFamilyEntry& f : model_families()) {
    for (const NamedModel& size : f.sizes) {
      out += fmt::format("  {:<{}}  {}\n", size.name, width, size.shape);
    }
  }
  return out;
}

} // namespace hotloop::model
