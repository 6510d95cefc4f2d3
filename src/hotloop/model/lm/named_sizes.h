#pragma once
// A model family's named sizes (GPT's, the Llama family's): the names in
// table order, and the entry a --model names.

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/errors.h"

namespace hotloop::model::lm {

// `Size` has a `const char* name`.
template <typename Size>
std::vector<std::string> size_names(const std::vector<Size>& sizes) {
  std::vector<std::string> names;
  for (const Size& s : sizes) {
    names.emplace_back(s.name);
  }
  return names;
}

// The size called `name`; UsageError "--model NAME: not a FAMILY size" with
// the names otherwise.
template <typename Size>
const Size& find_size(
    const std::vector<Size>& sizes,
    const std::string& name,
    const char* family) {
  const auto it = std::find_if(sizes.begin(), sizes.end(), [&](const Size& s) {
    return name == s.name;
  });
  if (it == sizes.end()) {
    throw UsageError(
        fmt::format("--model {}: not a {} size", name, family),
        fmt::format("choose one of: {}", fmt::join(size_names(sizes), ", ")));
  }
  return *it;
}

} // namespace hotloop::model::lm
