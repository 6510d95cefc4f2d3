#include "hotloop/model/lm/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
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
#include "weight_index.h"

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
    std::vector<fs::path> shards;
    for (const std::string& name : index_shards(read_json(path), path)) {
      shards.push_back(dir / name);
    }
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
  const std::string architecture = architecture_of(j, file);
  const ModelFamilyEntry* family = family_of_hf_architecture(architecture);
  if (family == nullptr) {
    lm::refuse(
        file,
        fmt::format(
            "architecture \"{}\"",
            architecture.empty() ? "(none named)" : architecture),
        fmt::format(
            "hotloop reads {}", fmt::join(hf_architecture_names(), ", ")));
  }
  if (!family->hf.read) {
    throw std::logic_error(
        "read_hf_config: " + family->title + " names " + architecture +
        " but has no HfAdapter::read");
  }
  return family->hf.read(j, architecture, context, file);
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
  std::optional<HfFolderFiles> files;
  std::vector<std::string> writers;
  for (const ModelFamilyEntry& f : model_families()) {
    if (f.hf.write) {
      writers.push_back(f.title);
      if ((files = f.hf.write(model))) {
        break;
      }
    }
  }
  if (!files) {
    throw UsageError(
        fmt::format("export-hf writes {} models", fmt::join(writers, " and ")),
        "this model is of none of those families");
  }
  fs::create_directories(dir);
  const std::string file = (fs::path(dir) / "model.safetensors").string();
  write_weights(file, files->weights, {{"format", "pt"}});
  const fs::path config_file = fs::path(dir) / "config.json";
  std::ofstream out(config_file);
  out << files->config;
  if (!out.flush()) {
    throw DataError(fmt::format("{}: cannot be written", config_file.string()));
  }
  return file;
}

ModelFamily HfModelConfig::family() const {
  return family_of_hf_architecture(architecture)->family;
}

namespace {

// The config.json of `kind`'s folder (`o` says the context and names it).
HfModelConfig folder_config(const ModelKind& kind, const ModelOptions& o) {
  const std::string dir = kind.folder();
  if (dir.empty() || !is_hf_folder(dir)) {
    throw UsageError(
        fmt::format("--model {}: not a folder with a config.json", o.name),
        "hf:DIR names a Hugging Face model folder (what save_pretrained writes)");
  }
  return read_hf_config(dir, o.lm.context);
}

// The folder says the shape; the options keep the window it runs.
ModelOptions resolve_folder(
    const ModelOptions& options,
    const ModelKind& kind) {
  ModelOptions o = options;
  for (auto [flag, v] :
       {std::pair{"layers", o.lm.layers},
        {"heads", o.lm.heads},
        {"width", o.lm.width},
        {"vocab", o.lm.vocab}}) {
    if (v > 0) {
      throw UsageError(
          fmt::format(
              "--{} {}: {}'s size is its config.json's", flag, v, o.name),
          fmt::format("drop --{} (only --context applies to a folder)", flag));
    }
  }
  o.lm.context = folder_config(kind, o).context;
  return o;
}

// The model of the family the folder's config.json names.
std::shared_ptr<Model> make_folder_model(
    const ModelOptions& o,
    const ModelKind& kind) {
  const HfModelConfig c = folder_config(kind, o);
  return family_of_hf_architecture(c.architecture)->hf.make(c);
}

} // namespace

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
  e.make = make_folder_model;
  e.resolve = resolve_folder;
  return e;
}

} // namespace hotloop::model
