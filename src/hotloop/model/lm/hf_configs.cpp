#include "hf_configs.h"

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

std::int64_t size_field(
    const nlohmann::json& j,
    const char* key,
    std::int64_t fallback,
    std::int64_t lowest,
    std::int64_t most,
    const std::filesystem::path& file) {
  const std::int64_t v = field<std::int64_t>(j, key, fallback, file);
  if (v < lowest || v > most) {
    throw DataError(
        fmt::format(
            "{}: \"{}\" is {}, outside {} to {}: no model is built from it",
            file.string(),
            key,
            v,
            lowest,
            most),
        "the config.json is damaged or not a model's: compare it with the model's own");
  }
  return v;
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
