#include "hotloop/core/json_depth.h"

#include <algorithm>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop {

std::size_t json_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) {
        return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void check_json_depth(std::string_view text, std::string_view what) {
  if (json_depth(text) > kMaxJsonDepth) {
    throw DataError(
        fmt::format(
            "{}{}JSON nested more than {} levels deep",
            what,
            what.empty() ? "" : ": ",
            kMaxJsonDepth),
        "no real file nests so deep: the file is damaged or hostile");
  }
}

namespace {

template <typename Json>
Json parse_checked(std::string_view text, std::string_view what) {
  check_json_depth(text, what);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not valid JSON: {}", what, e.what()));
  }
}

} // namespace

nlohmann::json parse_json(std::string_view text, std::string_view what) {
  return parse_checked<nlohmann::json>(text, what);
}

nlohmann::ordered_json parse_ordered_json(
    std::string_view text,
    std::string_view what) {
  return parse_checked<nlohmann::ordered_json>(text, what);
}

} // namespace hotloop
