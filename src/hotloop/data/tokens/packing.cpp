#include "hotloop/data/tokens/packing.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"

namespace hotloop::data {

std::vector<TokenSpan> fit_to_context(
    const std::vector<TokenSpan>& examples,
    std::int64_t context) {
  if (context < 2) {
    throw UsageError(fmt::format(
        "packing needs a context of at least 2 tokens, not {}", context));
  }
  const auto c = static_cast<std::uint64_t>(context);
  std::vector<TokenSpan> out;
  for (const TokenSpan& e : examples) {
    if (e.count < 2) {
      continue;
    }
    // Piece k starts at k (c - 1): its first token is the last one's final
    // token, so every target after the example's first token is in exactly
    // one piece.
    for (std::uint64_t first = 0; first + 1 < e.count; first += c - 1) {
      out.push_back({e.shard, e.first + first, std::min(c, e.count - first)});
    }
  }
  return out;
}

std::vector<PackedRow> pack_best_fit(
    const std::vector<TokenSpan>& spans,
    std::int64_t context) {
  std::vector<std::size_t> order(spans.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(
      order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return spans[a].count > spans[b].count;
      });
  std::vector<PackedRow> rows;
  // Rows by the room left in them; the first with room >= n is the best fit.
  std::multimap<std::uint64_t, std::size_t> room;
  const auto c = static_cast<std::uint64_t>(context);
  for (const std::size_t i : order) {
    const TokenSpan& s = spans[i];
    if (s.count > c) {
      throw Error(fmt::format(
          "packing: a span of {} tokens is longer than the context {} (fit_to_context splits them)",
          s.count,
          context));
    }
    std::size_t row = rows.size();
    std::uint64_t left = c;
    if (auto it = room.lower_bound(s.count); it != room.end()) {
      row = it->second;
      left = it->first;
      room.erase(it);
    } else {
      rows.emplace_back();
    }
    rows[row].push_back(s);
    if (left - s.count > 0) {
      room.emplace(left - s.count, row);
    }
  }
  return rows;
}

std::vector<PackedRow> pack_one_per_row(const std::vector<TokenSpan>& spans) {
  std::vector<PackedRow> rows;
  rows.reserve(spans.size());
  for (const TokenSpan& s : spans) {
    rows.push_back({s});
  }
  return rows;
}

namespace {

bool trained(const TokenDataset::Shard& s, std::uint64_t i) {
  return s.trained == nullptr || s.trained[i] != 0;
}

} // namespace

std::int64_t read_packed_row(
    const TokenDataset& data,
    const PackedRow& row,
    std::int64_t context,
    std::int64_t* inputs,
    std::int64_t* targets,
    std::int64_t* positions,
    std::vector<std::int32_t>& lengths) {
  std::int64_t at = 0;
  std::int64_t trained_targets = 0;
  for (const TokenSpan& span : row) {
    const TokenDataset::Shard& s = data.shards().at(span.shard);
    const auto n = static_cast<std::int64_t>(span.count);
    if (at + n > context) {
      throw Error(
          fmt::format("packing: a row of more than {} tokens", context));
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t token = span.first + static_cast<std::uint64_t>(i);
      inputs[at + i] = s.token(token);
      positions[at + i] = i;
      const bool target = i + 1 < n && trained(s, token + 1);
      targets[at + i] = target ? s.token(token + 1) : kNoTarget;
      trained_targets += target ? 1 : 0;
    }
    lengths.push_back(static_cast<std::int32_t>(n));
    at += n;
  }
  if (at < context) {
    lengths.push_back(static_cast<std::int32_t>(context - at));
    for (std::int64_t i = 0; at + i < context; ++i) {
      inputs[at + i] = 0;
      targets[at + i] = kNoTarget;
      positions[at + i] = i;
    }
  }
  return trained_targets;
}

bool has_trained_target(const TokenDataset& data, const PackedRow& row) {
  for (const TokenSpan& span : row) {
    const TokenDataset::Shard& s = data.shards().at(span.shard);
    for (std::uint64_t i = 1; i < span.count; ++i) {
      if (trained(s, span.first + i)) {
        return true;
      }
    }
  }
  return false;
}

DocumentMask parse_document_mask(const std::string& text) {
  if (text == "off") {
    return {};
  }
  if (text == "eos") {
    return {true, -1};
  }
  std::size_t used = 0;
  std::int64_t id = -1;
  try {
    id = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || id < 0) {
    throw UsageError(
        fmt::format(
            "--document-mask {}: expected off, eos or a token id", text),
        "eos takes the data's end-of-text token; an id names it");
  }
  return {true, id};
}

void cut_at_document_ends(
    const std::int64_t* inputs,
    std::int64_t length,
    std::int64_t end,
    std::int64_t* targets,
    std::int64_t* positions,
    std::vector<std::int32_t>& lengths) {
  std::int64_t start = 0;
  for (std::int64_t i = 0; i < length; ++i) {
    positions[i] = i - start;
    if (inputs[i] == end) {
      targets[i] = kNoTarget; // the next document's first token
      lengths.push_back(static_cast<std::int32_t>(i + 1 - start));
      start = i + 1;
    }
  }
  if (start < length) {
    lengths.push_back(static_cast<std::int32_t>(length - start));
  }
}

} // namespace hotloop::data
