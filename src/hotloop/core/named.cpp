#include "hotloop/core/named.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop {

std::string list_names(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) {
      out += i + 1 == names.size() ? " or " : ", ";
    }
    out += names[i];
  }
  return out;
}

void throw_unknown_name(
    std::string_view option,
    std::string_view text,
    const std::vector<std::string_view>& names) {
  throw UsageError(
      fmt::format("--{} {}: expected {}", option, text, list_names(names)));
}

} // namespace hotloop
