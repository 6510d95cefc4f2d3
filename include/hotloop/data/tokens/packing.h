#pragma once
// How examples (instruction data's lines: data/tokens/instructions.h) become
// the rows of `context` tokens a language model's batch holds (--packing):
//
//   best-fit  (the default) Whole examples into rows by best-fit decreasing:
//             longest first, each into the row with the least room that
//             still holds it, else into a new row (TRL's "bfd"). Each token's
//             position restarts at 0 with its example, attention stays inside
//             the example, and an example's last token predicts nothing (the
//             next example's first token is no target of it): a row trains
//             as its examples would one at a time (the batch carries the
//             positions, model/model_batch.h).
//   wrap      The examples in file order as one token stream, cut into
//             windows of context + 1 tokens: a window may hold the end of one
//             example and the start of the next, which attends to it.
//   none      One example a row, padded: as best-fit with one example a row.
//
// An example longer than the context (best-fit, none) is split into pieces of
// `context` tokens, each starting one token before the last one's end, so
// that each of its targets is trained exactly once; each piece is placed as
// an example of its own (it does not see the piece before it). A row's room
// after its examples is padding: token 0, never a target, positions from 0
// (a sequence of its own, which no example sees).

#include <cstdint>
#include <string>
#include <vector>

#include "hotloop/core/named.h"

namespace hotloop::data {

class TokenDataset;

enum class Packing { BestFit, Wrap, None };
inline constexpr Named<Packing> kPackingNames[] = {
    {Packing::BestFit, "best-fit"},
    {Packing::Wrap, "wrap"},
    {Packing::None, "none"}};

// Tokens [first, first + count) of shard `shard`: an example, or a piece of
// one.
struct TokenSpan {
  std::uint32_t shard = 0;
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  bool operator==(const TokenSpan&) const = default;
};

// The spans a row holds, in order; their counts add up to at most the
// context.
using PackedRow = std::vector<TokenSpan>;

// `examples` with each one longer than `context` tokens split into pieces of
// `context` that overlap by one token (the last piece may be shorter);
// examples of one token (nothing to predict) are left out.
std::vector<TokenSpan> fit_to_context(
    const std::vector<TokenSpan>& examples,
    std::int64_t context);

// Best-fit decreasing of `spans` (each at most `context` tokens) into rows of
// `context` tokens. Deterministic: equal lengths keep their order.
std::vector<PackedRow> pack_best_fit(
    const std::vector<TokenSpan>& spans,
    std::int64_t context);

// One span a row.
std::vector<PackedRow> pack_one_per_row(const std::vector<TokenSpan>& spans);

// A packed row read into a batch's row of `context` tokens: inputs, targets
// (the next token of the same span where it is trained, else kNoTarget) and
// positions (from 0 in each span, and in the padding). `lengths` gets the
// row's sequences: each span's count, then the padding's when there is any.
// Returns the trained targets.
std::int64_t read_packed_row(
    const TokenDataset& data,
    const PackedRow& row,
    std::int64_t context,
    std::int64_t* inputs,
    std::int64_t* targets,
    std::int64_t* positions,
    std::vector<std::int32_t>& lengths);

// Whether some target of `row` is trained.
bool has_trained_target(const TokenDataset& data, const PackedRow& row);

// --document-mask for token data that is not made of examples (tokens:,
// text:): windows read as usual, cut into documents after each token
// `end` (a document ends with its end-of-text token, as torchtitan's
// document mask cuts), each document's positions from 0, attention inside
// it (the batch carries the positions, as best-fit rows do), and an end
// token's target (the next document's first token) none.
struct DocumentMask {
  bool on = false;
  std::int64_t end = -1; // the token; -1 with `on`: the data's end of text
};
// "off", "eos" (the data's end-of-text token: TokenDataset::end_of_text())
// or a token id. UsageError naming --document-mask otherwise.
DocumentMask parse_document_mask(const std::string& text);

// One window's `length` inputs cut at `end` tokens: each token's position in
// its document into positions[0 .. length), targets of end tokens set to
// kNoTarget, the documents' lengths appended to `lengths`.
void cut_at_document_ends(
    const std::int64_t* inputs,
    std::int64_t length,
    std::int64_t end,
    std::int64_t* targets,
    std::int64_t* positions,
    std::vector<std::int32_t>& lengths);

} // namespace hotloop::data
