#include "weight_index.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

// A file of the folder itself: not a path out of it, not the folder.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
      name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

} // namespace

std::vector<std::string> index_shards(
    const nlohmann::json& j,
    const std::filesystem::path& file) {
  const auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object() || map->empty()) {
    throw DataError(fmt::format(
        "{}: has no \"weight_map\" of tensor names to shard files",
        file.string()));
  }
  std::set<std::string> shards;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string() || !plain_file_name(shard.get<std::string>())) {
      throw DataError(
          fmt::format(
              "{}: \"{}\" maps to {}, not the name of a file in the folder",
              file.string(),
              name.substr(0, 200),
              shard.dump().substr(0, 200)),
          "an index names its shards as save_pretrained writes them (model-00001-of-00002.safetensors)");
    }
    shards.insert(shard.get<std::string>());
    if (shards.size() > kMaxWeightShards) {
      throw DataError(fmt::format(
          "{}: names more than {} shard files, more than hotloop reads",
          file.string(),
          kMaxWeightShards));
    }
  }
  return {shards.begin(), shards.end()};
}

} // namespace hotloop::model
