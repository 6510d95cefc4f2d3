#include "hf_adapters.h"

namespace hotloop::model::lm {

std::optional<std::int64_t> token_id(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) {
    return std::nullopt;
  }
  if (it->is_number_integer()) {
    return it->get<std::int64_t>();
  }
  if (it->is_array() && !it->empty() && it->front().is_number_integer()) {
    return it->front().get<std::int64_t>(); // several EOS ids: the first
  }
  return std::nullopt;
}

void refuse(
    const std::filesystem::path& file,
    const std::string& what,
    const std::string& hint) {
  throw UsageError(
      fmt::format("{}: {}: hotloop does not run this", file.string(), what),
      hint);
}

} // namespace hotloop::model::lm
