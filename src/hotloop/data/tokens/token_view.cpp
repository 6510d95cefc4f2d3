#include "hotloop/data/tokens/token_view.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"

namespace hotloop::data {

namespace {

[[noreturn]] void past_the_end(
    const TokenDataset& data,
    std::size_t index,
    std::uint64_t count,
    const std::string& what) {
  throw UsageError(fmt::format(
      "--index {}: {} has {} {}", index, data.describe(), count, what));
}

} // namespace

TokenView view_tokens(
    const TokenDataset& data,
    const Tokenizer& tokenizer,
    std::size_t index,
    std::int64_t context) {
  TokenView view;
  if (data.has_examples()) {
    const std::vector<TokenSpan> examples = data.examples();
    if (index >= examples.size()) {
      past_the_end(data, index, examples.size(), "examples");
    }
    const TokenSpan& e = examples[index];
    const TokenDataset::Shard& s = data.shards().at(e.shard);
    for (std::uint64_t i = 0; i < e.count; ++i) {
      view.ids.push_back(s.token(e.first + i));
      view.trained.push_back(
          i > 0 && (s.trained == nullptr || s.trained[e.first + i] != 0));
    }
    view.what = fmt::format(
        "{}: example {} of {}", data.describe(), index, examples.size());
  } else {
    if (context < 1) {
      throw UsageError(
          fmt::format("--context {}: must be at least 1", context));
    }
    const std::uint64_t windows = data.windows(context);
    if (index >= windows) {
      past_the_end(
          data,
          index,
          windows,
          fmt::format("windows of {} tokens", context + 1));
    }
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(context) + 1);
    std::vector<std::int64_t> targets(static_cast<std::size_t>(context));
    data.read_window(index, context, tokens.data(), targets.data());
    view.ids = tokens;
    view.trained.push_back(false); // the window's first token is no target
    for (const std::int64_t t : targets) {
      view.trained.push_back(t != kNoTarget);
    }
    view.what = fmt::format(
        "{}: window {} of {} ({} tokens)",
        data.describe(),
        index,
        windows,
        context + 1);
  }
  for (const std::int64_t id : view.ids) {
    view.pieces.push_back(tokenizer.decode(id));
  }
  return view;
}

std::string marked_text(
    const TokenView& view,
    std::string_view open,
    std::string_view close) {
  std::string out;
  bool in = false;
  for (std::size_t i = 0; i < view.pieces.size(); ++i) {
    if (view.trained[i] != in) {
      out += in ? close : open;
      in = view.trained[i];
    }
    out += view.pieces[i];
  }
  if (in) {
    out += close;
  }
  return out;
}

nlohmann::json to_json(const TokenView& view) {
  nlohmann::json j;
  j["what"] = view.what;
  j["ids"] = view.ids;
  j["pieces"] = view.pieces;
  j["trained"] = view.trained;
  j["text"] = marked_text(view, "", "");
  return j;
}

} // namespace hotloop::data
