#pragma once
// Enum <-> word tables. Each enum that a flag or a file names is written out
// once, beside the enum, as a table of Named values (kPrecisionNames, ...);
// parsing, printing, --help and the option table (train/option_table.h) all
// read that table.

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hotloop {

template <typename E>
struct Named {
  E value;
  const char* name;
};

// "a, b or c": the words of a table, for messages and --help.
std::string list_names(const std::vector<std::string_view>& names);

// Throws UsageError "--`option` `text`: expected a, b or c".
[[noreturn]] void throw_unknown_name(
    std::string_view option,
    std::string_view text,
    const std::vector<std::string_view>& names);

template <typename E>
std::vector<std::string_view> names_of(std::span<const Named<E>> table) {
  std::vector<std::string_view> out;
  for (const auto& n : table) {
    out.emplace_back(n.name);
  }
  return out;
}

// The value `text` names in `table`; a UsageError naming --`option` and the
// words it takes otherwise.
template <typename E>
E parse_named(
    std::span<const Named<E>> table,
    std::string_view text,
    std::string_view option) {
  for (const auto& n : table) {
    if (text == n.name) {
      return n.value;
    }
  }
  throw_unknown_name(option, text, names_of(table));
}

// The word for `value` ("?" when the table lacks it, a bug).
template <typename E>
const char* name_of(std::span<const Named<E>> table, E value) {
  for (const auto& n : table) {
    if (n.value == value) {
      return n.name;
    }
  }
  return "?";
}

} // namespace hotloop
