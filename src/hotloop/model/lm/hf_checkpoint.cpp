#include "hotloop/model/lm/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hf_adapters.h"
#include "hotloop/errors.h"
#include "hotloop/model/families.h"
#include "hotloop/model/lm/language_model.h"
#include "json_file.h"

namespace hotloop::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  return read_json_object(
      path,
      "a Hugging Face model folder has the config.json save_pretrained writes");
}

// config.json's architecture: "architectures"' first, else the one its
// "model_type" names; "" for neither.
std::string architecture_of(const json& j, const fs::path& file) {
  if (const auto a = j.find("architectures");
      a != j.end() && a->is_array() && !a->empty() && a->front().is_string()) {
    return a->front().get<std::string>();
  }
  const std::string type = lm::field<std::string>(j, "model_type", "", file);
  for (const ModelFamilyEntry& f : model_families()) {
    for (const HfArchitecture& a : f.hf_architectures) {
      if (a.model_type == type) {
        return a.name;
      }
    }
  }
  return type;
}

// The weight files of DIR: one file, or an index's shards in order.
std::vector<fs::path> weight_files(const fs::path& dir) {
  for (const char* single : {"model.safetensors", "pytorch_model.bin"}) {
    if (fs::is_regular_file(dir / single)) {
      return {dir / single};
    }
  }
  for (const char* index :
       {"model.safetensors.index.json", "pytorch_model.bin.index.json"}) {
    const fs::path path = dir / index;
    if (!fs::is_regular_file(path)) {
      continue;
    }
    const json j = read_json(path);
    const auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object() || map->empty()) {
      throw DataError(fmt::format(
          "{}: has no \"weight_map\" of tensor names to shard files",
          path.string()));
    }
    std::set<std::string> seen;
    std::vector<fs::path> shards;
    for (const auto& [name, shard] : map->items()) {
      if (!shard.is_string()) {
        throw DataError(fmt::format(
            "{}: \"{}\" maps to {}, not a file name",
            path.string(),
            name,
            shard.dump()));
      }
      if (seen.insert(shard.get<std::string>()).second) {
        shards.push_back(dir / shard.get<std::string>());
      }
    }
    std::sort(shards.begin(), shards.end());
    for (const fs::path& s : shards) {
      if (!fs::is_regular_file(s)) {
        throw DataError(
            fmt::format(
                "{}: shard {} is missing",
                path.string(),
                s.filename().string()),
            "download every file the index names");
      }
    }
    return shards;
  }
  throw DataError(
      fmt::format(
          "{}: no model.safetensors, pytorch_model.bin or sharded index in the folder",
          dir.string()),
      "a Hugging Face model folder holds the files save_pretrained writes");
}

} // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) &&
      fs::is_regular_file(fs::path(path) / "config.json", ec);
}

namespace {

HfModelConfig read_hf_config_json(
    const std::string& dir,
    std::int64_t context) {
  const fs::path file = fs::path(dir) / "config.json";
  const json j = read_json(file);
  HfModelConfig out;
  out.architecture = architecture_of(j, file);
  const ModelFamilyEntry* family = family_of_hf_architecture(out.architecture);
  if (family == nullptr) {
    lm::refuse(
        file,
        fmt::format(
            "architecture \"{}\"",
            out.architecture.empty() ? "(none named)" : out.architecture),
        fmt::format(
            "hotloop reads {}", fmt::join(hf_architecture_names(), ", ")));
  }
  // The family's reader (a new family adds its branch and its config to
  // HfModelConfig's variant).
  if (family->family == ModelFamily::Gpt) {
    out.config = lm::read_gpt2_config(j, context, file);
  } else if (family->family == ModelFamily::Llama) {
    out.config = lm::read_llama_config(j, out.architecture, context, file);
  } else {
    throw std::logic_error(
        "read_hf_config: no config reader for " + out.architecture);
  }
  return out;
}

} // namespace

HfModelConfig read_hf_config(const std::string& dir, std::int64_t context) {
  try {
    return read_hf_config_json(dir, context);
  } catch (const nlohmann::json::exception& e) {
    // A field of another type than transformers writes.
    throw DataError(fmt::format(
        "{}: {}", (fs::path(dir) / "config.json").string(), e.what()));
  }
}

StateDict read_hf_weights(const std::string& dir) {
  StateDict out;
  for (const fs::path& file : weight_files(dir)) {
    StateDict part = read_weights(file.string());
    std::move(part.begin(), part.end(), std::back_inserter(out));
  }
  return out;
}

std::string write_hf_folder(
    const std::string& dir,
    const LanguageModel& model) {
  std::string config;
  StateDict weights;
  if (const auto* gpt = dynamic_cast<const Gpt*>(&model)) {
    config = hf_gpt2_config(gpt->config());
    weights = hf_gpt2_weights(*gpt);
  } else if (const auto* llama = dynamic_cast<const Llama*>(&model)) {
    config = hf_llama_config(llama->config());
    weights = lm::hf_llama_weights(*llama);
  } else {
    throw UsageError(
        "export-hf writes GPT and Llama-family models",
        "this model is neither");
  }
  fs::create_directories(dir);
  const std::string file = (fs::path(dir) / "model.safetensors").string();
  write_weights(file, weights, {{"format", "pt"}});
  const fs::path config_file = fs::path(dir) / "config.json";
  std::ofstream out(config_file);
  out << config;
  if (!out.flush()) {
    throw DataError(fmt::format("{}: cannot be written", config_file.string()));
  }
  return file;
}

std::int64_t HfModelConfig::context() const {
  return std::visit([](const auto& c) { return c.context; }, config);
}

ModelFamily HfModelConfig::family() const {
  return family_of_hf_architecture(architecture)->family;
}

ModelFamilyEntry hf_folder_family() {
  // model_help() adds the architectures, which are the families' that
  // read them.
  ModelFamilyEntry e(
      ModelFamily::HfFolder,
      "Hugging Face folders",
      "a folder save_pretrained wrote, read by its config.json");
  e.prefix = "hf:";
  e.form = "hf:DIR";
  e.checkpointing = "as the family its config.json names";
  e.make = [](const ModelOptions& o) -> std::shared_ptr<Model> {
    return make_language_model(o);
  };
  return e;
}

} // namespace hotloop::model
