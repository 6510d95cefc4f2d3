#pragma once
// A sharded checkpoint's index (model.safetensors.index.json,
// pytorch_model.bin.index.json): which files of the folder hold the
// weights. No LibTorch here, so the fuzz target builds without it.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotloop::model {

// Past any released checkpoint (the largest have about 200 files).
inline constexpr std::size_t kMaxWeightShards = 4096;

// The distinct files "weight_map" names, sorted. DataError naming `file`
// for an index without a weight_map, a value that is not the name of a
// file in the folder itself (a path, "..", empty), or more than
// kMaxWeightShards files.
std::vector<std::string> index_shards(
    const nlohmann::json& j,
    const std::filesystem::path& file);

} // namespace hotloop::model
