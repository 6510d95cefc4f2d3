#include "json_file.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "hotloop/core/json_depth.h"
#include "hotloop/errors.h"

namespace hotloop::model {

nlohmann::json read_json_object(
    const std::filesystem::path& path,
    const std::string& missing_hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(
        fmt::format("{}: cannot be read", path.string()), missing_hint);
  }
  const std::string text(std::istreambuf_iterator<char>(in), {});
  check_json_depth(text, path.string());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw DataError(fmt::format("{}: not a JSON object", path.string()));
  }
  return j;
}

} // namespace hotloop::model
