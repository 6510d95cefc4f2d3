#pragma once
// A JSON object read from a file of a model folder (config.json, an index,
// adapter_config.json), for the language models' readers.

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace hotloop::model {

// `path`'s JSON object. DataError naming the file when it cannot be read
// (with `missing_hint` as the fix) or is not a JSON object.
nlohmann::json read_json_object(
    const std::filesystem::path& path,
    const std::string& missing_hint = {});

} // namespace hotloop::model
