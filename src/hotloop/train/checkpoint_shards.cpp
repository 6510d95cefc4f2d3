#include "hotloop/train/checkpoint_shards.h"

#include <filesystem>
#include <map>
#include <regex>

#include <ATen/ops/empty_strided.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kShardMetaKey = "hotloop.checkpoint_shard";
const std::regex kShardName(R"(step-(\d+)\.rank-(\d+)-of-(\d+)\.safetensors)");

} // namespace

std::int64_t ShardedTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    n *= d;
  }
  return n;
}

nlohmann::json ShardIndex::to_json() const {
  nlohmann::json tensors_json = nlohmann::json::array();
  for (const ShardedTensor& t : tensors) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const ShardPiece& p : t.pieces) {
      pieces.push_back({p.rank, p.from, p.count});
    }
    tensors_json.push_back(
        {{"name", t.name},
         {"shape", t.shape},
         {"strides", t.strides},
         {"pieces", pieces}});
  }
  nlohmann::json out = {
      {"id", id}, {"ranks", ranks}, {"tensors", tensors_json}};
  if (!order.empty()) {
    out["order"] = order;
  }
  return out;
}

ShardIndex ShardIndex::from_json(
    const nlohmann::json& j,
    const std::string& where) {
  try {
    ShardIndex index;
    index.id = j.at("id").get<std::string>();
    index.ranks = j.at("ranks").get<int>();
    for (const nlohmann::json& t : j.at("tensors")) {
      ShardedTensor s;
      s.name = t.at("name").get<std::string>();
      s.shape = t.at("shape").get<std::vector<std::int64_t>>();
      s.strides = t.at("strides").get<std::vector<std::int64_t>>();
      for (const nlohmann::json& p : t.at("pieces")) {
        s.pieces.push_back(
            {p.at(0).get<int>(),
             p.at(1).get<std::int64_t>(),
             p.at(2).get<std::int64_t>()});
      }
      index.tensors.push_back(std::move(s));
    }
    index.order = j.value("order", nlohmann::json::array())
                      .get<std::vector<std::string>>();
    return index;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format(
        "{}: its index of checkpoint shards is unreadable ({})",
        where,
        e.what()));
  }
}

std::string shard_file_path(
    const std::string& dir,
    std::int64_t step,
    int rank,
    int ranks) {
  return (fs::path(dir) /
          fmt::format(
              "step-{:08d}.rank-{}-of-{}.safetensors", step, rank, ranks))
      .string();
}

void write_shard_file(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    int rank,
    const model::StateDict& pieces) {
  const nlohmann::json stamp = {
      {"id", index.id}, {"step", step}, {"rank", rank}, {"ranks", index.ranks}};
  model::write_weights(
      shard_file_path(dir, step, rank, index.ranks),
      pieces,
      {{kShardMetaKey, stamp.dump()}});
}

model::StateDict read_shard_file(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    int rank) {
  const std::string path = shard_file_path(dir, step, rank, index.ranks);
  if (!fs::exists(path)) {
    throw DataError(
        fmt::format(
            "{} is missing: the checkpoint of step {} was written by {} ranks, each into its own file",
            path,
            step,
            index.ranks),
        kRestoreShardsHint);
  }
  model::WeightFile f = model::read_weight_file(path);
  const auto meta = f.metadata.find(kShardMetaKey);
  const nlohmann::json stamp = meta == f.metadata.end()
      ? nlohmann::json()
      : nlohmann::json::parse(meta->second, nullptr, false);
  const nlohmann::json expected = {
      {"id", index.id}, {"step", step}, {"rank", rank}, {"ranks", index.ranks}};
  if (stamp != expected) {
    throw DataError(
        fmt::format(
            "{} does not belong to this checkpoint: it says {}, the checkpoint's index expects {}",
            path,
            stamp.is_object() ? stamp.dump() : std::string("nothing"),
            expected.dump()),
        kRestoreShardsHint);
  }
  return std::move(f.tensors);
}

std::vector<std::string> missing_shard_files(
    const std::string& dir,
    const nlohmann::json& meta) {
  std::vector<std::string> out;
  if (!meta.contains(kShardIndexKey)) {
    return out;
  }
  const int ranks = meta[kShardIndexKey].value("ranks", 0);
  const auto step = meta.at("step").get<std::int64_t>();
  for (int r = 0; r < ranks; ++r) {
    const std::string path = shard_file_path(dir, step, r, ranks);
    if (!fs::exists(path)) {
      out.push_back(path);
    }
  }
  return out;
}

model::StateDict whole_tensors(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index) {
  std::vector<at::Tensor> whole(index.tensors.size());
  // One rank's file at a time: the pieces it holds put in place.
  for (int r = 0; r < index.ranks; ++r) {
    const model::StateDict file = read_shard_file(dir, step, index, r);
    const std::map<std::string, at::Tensor> pieces(file.begin(), file.end());
    for (std::size_t i = 0; i < index.tensors.size(); ++i) {
      const ShardedTensor& t = index.tensors[i];
      for (const ShardPiece& p : t.pieces) {
        if (p.rank != r) {
          continue;
        }
        const auto it = pieces.find(t.name);
        if (it == pieces.end() || it->second.numel() != p.count || p.from < 0 ||
            p.from + p.count > t.numel()) {
          throw DataError(
              fmt::format(
                  "{}: its piece of {} is not the one the index names (elements {} to {} of {})",
                  shard_file_path(dir, step, r, index.ranks),
                  t.name,
                  p.from,
                  p.from + p.count,
                  t.numel()),
              kRestoreShardsHint);
        }
        if (!whole[i].defined()) {
          whole[i] =
              at::empty_strided(t.shape, t.strides, it->second.options());
        }
        whole[i]
            .as_strided({t.numel()}, {1})
            .narrow(0, p.from, p.count)
            .copy_(it->second);
      }
    }
  }
  model::StateDict out;
  for (std::size_t i = 0; i < index.tensors.size(); ++i) {
    if (!whole[i].defined()) {
      throw DataError(fmt::format(
          "{}: the index names no piece of {}",
          fs::path(dir).string(),
          index.tensors[i].name));
    }
    out.emplace_back(index.tensors[i].name, whole[i].contiguous());
  }
  return out;
}

model::StateDict whole_model(
    const std::string& dir,
    std::int64_t step,
    const ShardIndex& index,
    const model::StateDict& head) {
  std::map<std::string, at::Tensor> named(head.begin(), head.end());
  const std::string prefix = kModelPieces;
  for (auto& [name, t] : whole_tensors(dir, step, index)) {
    named[name.starts_with(prefix) ? name.substr(prefix.size()) : name] =
        std::move(t);
  }
  model::StateDict out;
  for (const std::string& name : index.order) {
    const auto it = named.find(name);
    if (it == named.end()) {
      throw DataError(
          fmt::format(
              "the checkpoint of step {} in {} lacks the model's {}: neither its file nor its shard files hold it",
              step,
              dir,
              name),
          kRestoreShardsHint);
    }
    out.emplace_back(name, std::move(it->second));
  }
  return out;
}

Checkpoint load_whole_checkpoint(const std::string& path) {
  Checkpoint c = load_checkpoint(path);
  if (!c.meta.contains(kShardIndexKey)) {
    return c;
  }
  const std::string dir = fs::path(path).parent_path().string();
  const auto step = c.meta.at("step").get<std::int64_t>();
  const ShardIndex index = ShardIndex::from_json(c.meta[kShardIndexKey], path);
  const model::StateDict whole = whole_tensors(dir, step, index);
  c.optimizer.insert(c.optimizer.end(), whole.begin(), whole.end());
  c.meta.erase(kShardIndexKey);
  if (c.meta.contains(kModelShardIndexKey)) {
    c.model = whole_model(
        dir,
        step,
        ShardIndex::from_json(c.meta[kModelShardIndexKey], path),
        c.model);
    c.meta.erase(kModelShardIndexKey);
  }
  return c;
}

model::WeightFile read_whole_weights(const std::string& path) {
  model::WeightFile f = model::read_weight_file(path);
  const auto meta = f.metadata.find(kCheckpointMetaKey);
  if (meta == f.metadata.end()) {
    return f;
  }
  nlohmann::json j = nlohmann::json::parse(meta->second, nullptr, false);
  if (!j.is_object() || !j.contains(kModelShardIndexKey)) {
    return f;
  }
  // The model's tensors of the file, then the units' from the shards.
  const std::string prefix = kModelPieces;
  model::StateDict head;
  model::StateDict rest;
  for (auto& [name, t] : f.tensors) {
    if (name.starts_with(prefix)) {
      head.emplace_back(name.substr(prefix.size()), std::move(t));
    } else {
      rest.emplace_back(name, std::move(t));
    }
  }
  f.tensors = std::move(rest);
  for (auto& [name, t] : whole_model(
           fs::path(path).parent_path().string(),
           j.at("step").get<std::int64_t>(),
           ShardIndex::from_json(j[kModelShardIndexKey], path),
           head)) {
    f.tensors.emplace_back(prefix + name, std::move(t));
  }
  j.erase(kModelShardIndexKey);
  f.metadata[kCheckpointMetaKey] = j.dump();
  return f;
}

void remove_orphan_shards(
    const std::string& dir,
    std::int64_t up_to,
    int ranks_at_up_to,
    const std::function<void(const std::string&)>& log) {
  std::error_code ec;
  std::vector<fs::path> orphans;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, kShardName)) {
      continue;
    }
    const std::int64_t step = std::stoll(m[1].str());
    const fs::path head =
        fs::path(dir) / fmt::format("step-{:08d}.safetensors", step);
    const bool replaced = step == up_to && ranks_at_up_to > 0 &&
        std::stoi(m[3].str()) != ranks_at_up_to;
    if (step <= up_to && (replaced || !fs::exists(head))) {
      orphans.push_back(e.path());
    }
  }
  for (const fs::path& p : orphans) {
    fs::remove(p, ec);
    if (log) {
      log(fmt::format(
          "removed {}: a checkpoint shard no checkpoint holds (its save was stopped, its checkpoint was older than the last kept, or saved again by another number of ranks)",
          p.string()));
    }
  }
}

} // namespace hotloop::train
