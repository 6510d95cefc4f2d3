#pragma once
// Reading a Hugging Face folder's config.json into a family's config: the
// field readers the families share (hf_configs.cpp) and each family's
// reader (model/gpt/gpt_hf_config.cpp, model/llama/llama_hf_config.cpp).
// Every size is checked before anything is built from it. No LibTorch here,
// so the fuzz target builds without it.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/model/gpt/gpt_config.h"
#include "hotloop/model/llama/llama_config.h"

namespace hotloop::model::lm {

// A config field: its value, or `fallback` when it is absent or null; a
// DataError naming the field when it has the wrong type.
template <typename T>
T field(
    const nlohmann::json& j,
    const char* key,
    T fallback,
    const std::filesystem::path& file) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return fallback;
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    static_assert(std::is_signed_v<T>);
    if (it->is_number_float()) {
      // A whole number written as a float (4096.0) reads as one. Any other
      // float, or one past T's range (1e107: converting it is undefined
      // behaviour), is a damaged field.
      const double v = it->get<double>();
      const double limit = -static_cast<double>(std::numeric_limits<T>::min());
      if (!(v == std::trunc(v) && v >= -limit && v < limit)) {
        throw DataError(fmt::format(
            "{}: \"{}\" is {}, not a whole number",
            file.string(),
            key,
            it->dump()));
      }
      return static_cast<T>(v);
    }
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw DataError(fmt::format(
        "{}: \"{}\" is {}, not the {} expected",
        file.string(),
        key,
        it->dump(),
        std::is_same_v<T, bool>              ? "true/false"
            : std::is_same_v<T, std::string> ? "string"
                                             : "number"));
  }
}

// A size field of a config (layers, widths, heads, the vocabulary,
// positions): `field`, which must lie in [lowest, most]; a DataError naming
// the file, the field and the bound otherwise, before anything is built
// from it (a config.json saying "vocab_size": 100000000000 would otherwise
// ask for terabytes).
std::int64_t size_field(
    const nlohmann::json& j,
    const char* key,
    std::int64_t fallback,
    std::int64_t lowest,
    std::int64_t most,
    const std::filesystem::path& file);

// The bounds: well past every released model (the largest vocabulary is
// Gemma's 262,144; the longest context Llama 4 Scout's 10M).
inline constexpr std::int64_t kMaxVocabulary = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 17;
inline constexpr std::int64_t kMaxLayers = 4096;
inline constexpr std::int64_t kMaxHeads = 4096;
inline constexpr std::int64_t kMaxPositions = std::int64_t{1} << 26;

// A token id field; several ids (a list of EOS ids): the first; nullopt
// when absent or not an id.
std::optional<std::int64_t> token_id(const nlohmann::json& j, const char* key);

// UsageError "FILE: WHAT: hotloop does not run this" with `hint`.
[[noreturn]] void refuse(
    const std::filesystem::path& file,
    const std::string& what,
    const std::string& hint);

// A GPT2LMHeadModel's config.json (`j`, read from `file`). `context` > 0
// must equal the position table's size.
GptConfig read_gpt2_config(
    const nlohmann::json& j,
    std::int64_t context,
    const std::filesystem::path& file);

// A Llama-family config.json of `architecture` (one of llama_family()'s).
// `context` > 0: the window to run, else max_position_embeddings up to 1024.
LlamaConfig read_llama_config(
    const nlohmann::json& j,
    const std::string& architecture,
    std::int64_t context,
    const std::filesystem::path& file);

// The architecture each LlamaFamily is written as (its model_type:
// kLlamaFamilyNames).
inline constexpr Named<LlamaFamily> kLlamaArchitectures[] = {
    {LlamaFamily::Llama, "LlamaForCausalLM"},
    {LlamaFamily::Qwen2, "Qwen2ForCausalLM"},
    {LlamaFamily::Mistral, "MistralForCausalLM"}};

} // namespace hotloop::model::lm
