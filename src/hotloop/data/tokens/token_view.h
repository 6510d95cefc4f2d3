#pragma once
// What `hotloop data show` prints: one example of instruction data (or one
// window of other token data) as the model sees it: its token ids, each
// token's text, and which tokens are trained (predicting them counts in the
// loss), as Axolotl's preprocessing debug view shows them.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hotloop::data {

class TokenDataset;
class Tokenizer;

struct TokenView {
  std::string what; // "instruct:FILE train: example 3 of 216"
  std::vector<std::int64_t> ids;
  std::vector<std::string> pieces; // each token's bytes
  std::vector<bool> trained; // predicting the token is trained
};

// Example `index` of data made of examples (instruct:), else window `index`
// of `context` + 1 tokens (its first token is no target). UsageError for an
// index past the end.
TokenView view_tokens(
    const TokenDataset& data,
    const Tokenizer& tokenizer,
    std::size_t index,
    std::int64_t context);

// The view's text with each trained run between `open` and `close`.
std::string marked_text(
    const TokenView& view,
    std::string_view open,
    std::string_view close);

// {"what", "ids", "pieces", "trained", "text"}.
nlohmann::json to_json(const TokenView& view);

} // namespace hotloop::data
