#include "hotloop/train/checkpoint_file.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/train/checkpoint_shards.h"

namespace hotloop::train {

namespace fs = std::filesystem;

namespace {

const std::regex kName(R"(step-(\d+)\.safetensors)");

void add(
    model::StateDict& out,
    const std::string& prefix,
    const model::StateDict& part) {
  for (const auto& [name, t] : part) {
    out.emplace_back(prefix + name, t);
  }
}

} // namespace

void create_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw DataError(fmt::format(
        "cannot create the checkpoint folder {}: {}", dir, ec.message()));
  }
}

void write_checkpoint(
    const std::string& path,
    const Checkpoint& c,
    const std::function<void()>& before_commit) {
  model::StateDict all;
  add(all, "model/", c.model);
  add(all, "optimizer/", c.optimizer);
  add(all, "scaler/", c.scaler);
  add(all, "rng/", c.rng);
  model::write_weights(
      path, all, {{kCheckpointMetaKey, c.meta.dump()}}, before_commit);
}

std::string save_checkpoint(
    const std::string& dir,
    std::int64_t step,
    const Checkpoint& c,
    int keep,
    const std::function<void()>& before_commit) {
  create_checkpoint_dir(dir);
  const std::string path =
      (fs::path(dir) / fmt::format("step-{:08d}.safetensors", step)).string();
  write_checkpoint(path, c, before_commit);
  std::error_code ec;
  const auto existing = list_checkpoints(dir);
  for (std::size_t i = static_cast<std::size_t>(keep); i < existing.size();
       ++i) {
    fs::remove(existing[i], ec);
  }
  // The shard files of the checkpoints just removed, and of this step's
  // earlier save by another number of ranks.
  remove_orphan_shards(
      dir,
      step,
      c.meta.contains(kShardIndexKey) ? c.meta[kShardIndexKey].value("ranks", 0)
                                      : 0);
  return path;
}

Checkpoint load_checkpoint(const std::string& path) {
  const model::WeightFile f = model::read_weight_file(path);
  const auto meta = f.metadata.find(kCheckpointMetaKey);
  if (meta == f.metadata.end()) {
    throw DataError(
        fmt::format("{} is a weight file, not a hotloop checkpoint", path),
        "use it with --init to start from its weights");
  }
  Checkpoint c;
  c.meta = nlohmann::json::parse(meta->second, nullptr, false);
  if (c.meta.is_discarded() || !c.meta.contains("step")) {
    throw DataError(
        fmt::format("{}: its checkpoint metadata is unreadable", path));
  }
  for (const auto& [name, t] : f.tensors) {
    const auto slash = name.find('/');
    const std::string part = name.substr(0, slash);
    const std::string rest =
        slash == std::string::npos ? name : name.substr(slash + 1);
    if (part == "model") {
      c.model.emplace_back(rest, t);
    } else if (part == "optimizer") {
      c.optimizer.emplace_back(rest, t);
    } else if (part == "scaler") {
      c.scaler.emplace_back(rest, t);
    } else if (part == "rng") {
      c.rng.emplace_back(rest, t);
    } else {
      throw DataError(fmt::format("{}: unexpected tensor {}", path, name));
    }
  }
  const auto missing =
      missing_shard_files(fs::path(path).parent_path().string(), c.meta);
  if (!missing.empty()) {
    throw DataError(
        fmt::format(
            "{}: its optimizer state is sharded and {} of its shard files {} missing: {}",
            path,
            missing.size(),
            missing.size() == 1 ? "is" : "are",
            missing.front()),
        kRestoreShardsHint);
  }
  return c;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, kName)) {
      found.emplace_back(std::stoll(m[1].str()), e.path().string());
    }
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  std::vector<std::string> out;
  for (auto& [step, path] : found) {
    out.push_back(std::move(path));
  }
  return out;
}

std::optional<std::pair<std::string, Checkpoint>> newest_valid_checkpoint(
    const std::string& dir,
    const std::function<void(const std::string&)>& warn) {
  for (const auto& path : list_checkpoints(dir)) {
    try {
      return std::make_pair(path, load_checkpoint(path));
    } catch (const DataError& e) {
      warn(fmt::format("skipping {}: {}", path, e.what()));
    }
  }
  return std::nullopt;
}

} // namespace hotloop::train
