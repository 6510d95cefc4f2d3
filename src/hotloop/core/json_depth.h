#pragma once
// JSON from outside (a model folder's config.json, tokenizer.json,
// tokenizer_config.json and shard index, a PEFT adapter_config.json,
// instruction lines, a WebDataset index, a safetensors header) has its
// nesting checked before nlohmann parses it: the parser recurses once a
// level, so a file of 100 000 '[' overflows an 8 MiB stack (measured: it
// parses 50 000) where it should be an error naming the file.

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hotloop {

// Deeper than any real file (Hugging Face configs nest under 10 levels).
inline constexpr std::size_t kMaxJsonDepth = 512;

// The deepest nesting of arrays and objects in `text` (brackets inside
// strings do not count), counted up to `limit` + 1.
std::size_t json_depth(
    std::string_view text,
    std::size_t limit = kMaxJsonDepth);

// DataError "`what`: JSON nested more than 512 levels deep" when `text` is.
void check_json_depth(std::string_view text, std::string_view what);

// `text` as JSON after check_json_depth; DataError "`what`: not valid JSON:
// ..." for text that is not.
nlohmann::json parse_json(std::string_view text, std::string_view what);
nlohmann::ordered_json parse_ordered_json(
    std::string_view text,
    std::string_view what);

} // namespace hotloop
