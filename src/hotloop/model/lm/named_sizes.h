#pragma once
// A language-model family's named sizes (GPT's, the Llama family's): the
// names in table order, the entry a --model names, the sizes as the
// registry lists them (hotloop/model/family.h), and a size's shape written
// into the options.

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/model.h"

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

// A size's shape, one line: "4 layers, 4 heads (2 KV), width 128, context
// 128, the data's vocabulary" (no "(N KV)" when every head has its own).
// `Size` has `config` (layers, heads, width, context, vocab; kv_heads where
// heads share keys and values) and `vocab_from_data`.
template <typename Size>
std::string shape_line(const Size& s) {
  const auto& c = s.config;
  std::string line = fmt::format("{} layers, {} heads", c.layers, c.heads);
  if constexpr (requires { c.kv_heads; }) {
    if (c.kv_heads != c.heads) {
      line += fmt::format(" ({} KV)", c.kv_heads);
    }
  }
  line += fmt::format(", width {}, context {}, ", c.width, c.context);
  return line +
      (s.vocab_from_data ? std::string("the data's vocabulary")
                         : fmt::format("vocabulary {}", c.vocab));
}

// The sizes as the family's entry lists them (`Size` also has `name` and
// `recipe`).
template <typename Size>
std::vector<NamedModel> named_models(const std::vector<Size>& sizes) {
  std::vector<NamedModel> out;
  for (const Size& s : sizes) {
    out.push_back({s.name, shape_line(s), s.recipe});
  }
  return out;
}

// `options` with a size's config written out in full (layers, heads, width,
// context, vocabulary): a family's ModelFamilyEntry::resolve.
template <typename Config>
ModelOptions with_shape(const ModelOptions& options, const Config& c) {
  ModelOptions o = options;
  o.lm = {c.layers, c.heads, c.width, c.context, c.vocab};
  return o;
}

} // namespace hotloop::model::lm
