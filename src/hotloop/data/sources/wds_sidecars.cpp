#include "hotloop/data/sources/wds_sidecars.h"

#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/json_depth.h"
#include "hotloop/errors.h"

namespace hotloop::data {

std::int64_t parse_class_label(
    std::span<const std::uint8_t> text,
    const std::string& shard,
    const std::string& key) {
  if (text.size() > kMaxClassTextBytes) {
    throw DataError(fmt::format(
        "{}: sample '{}': .cls holds more than {} bytes, not a class number",
        shard,
        key,
        kMaxClassTextBytes));
  }
  const auto* first = reinterpret_cast<const char*>(text.data());
  const auto* last = first + text.size();
  while (last > first &&
         (last[-1] == '\n' || last[-1] == ' ' || last[-1] == '\r')) {
    --last;
  }
  std::int64_t label = -1;
  const auto [ptr, ec] = std::from_chars(first, last, label);
  if (first == last || ec != std::errc() || ptr != last || label < 0) {
    throw DataError(fmt::format(
        "{}: sample '{}': .cls is '{}', not a class number",
        shard,
        key,
        std::string(first, last)));
  }
  if (label >= kMaxClasses) {
    throw DataError(
        fmt::format(
            "{}: sample '{}': class {} is past the {} classes hotloop accepts",
            shard,
            key,
            label,
            kMaxClasses),
        "number the classes from 0 (hotloop pack does)");
  }
  return label;
}

ShardIndex parse_shard_index(std::string_view text, const std::string& file) {
  check_json_depth(text, file);
  ShardIndex index;
  try {
    const auto j = nlohmann::json::parse(text);
    index.classes = j.at("classes").get<std::vector<std::string>>();
    if (j.contains("max_side")) {
      const auto& side = j.at("max_side");
      if (!side.is_number_integer() || side.get<std::int64_t>() < 0) {
        throw DataError(
            fmt::format(
                "{}: max_side {} is not a side in pixels", file, side.dump()),
            "delete it or write the shards again with hotloop pack");
      }
      index.max_side = side.get<std::int64_t>();
    }
    if (j.contains("restart_markers")) {
      const auto& marked = j.at("restart_markers");
      if (!marked.is_boolean()) {
        throw DataError(
            fmt::format(
                "{}: restart_markers {} is not true or false",
                file,
                marked.dump()),
            "delete it or write the shards again with hotloop pack");
      }
      index.restart_markers = marked.get<bool>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(
        fmt::format("{}: not a hotloop shard index: {}", file, e.what()),
        "delete it or write the shards again with hotloop pack");
  }
  if (static_cast<std::int64_t>(index.classes.size()) > kMaxClasses) {
    throw DataError(fmt::format(
        "{}: {} classes is more than the {} hotloop accepts",
        file,
        index.classes.size(),
        kMaxClasses));
  }
  return index;
}

} // namespace hotloop::data
