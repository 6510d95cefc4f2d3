// Packing examples into rows (data/tokens/packing.h): long examples split
// so that every target is trained once, best-fit decreasing's choice of
// row, what a packed row reads as (positions restarting, no target across
// examples, padding never a target), and the token loader's packed batches.

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>
#include <vector>

#include <ATen/ATen.h>

#include "hotloop/data/tokens/packing.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/token_loader.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

std::vector<TokenSpan> spans_of(const std::vector<std::uint64_t>& lengths) {
  std::vector<TokenSpan> out;
  std::uint64_t at = 0;
  for (const std::uint64_t n : lengths) {
    out.push_back({0, at, n});
    at += n;
  }
  return out;
}

// Examples of `lengths` tokens in one sequence; example e's tokens are
// 100 e + i; each example's first token is its prompt, the rest trained.
std::shared_ptr<const TokenDataset> examples(
    const std::vector<std::uint64_t>& lengths) {
  TokenSequence s;
  s.name = "examples";
  for (std::size_t e = 0; e < lengths.size(); ++e) {
    s.example_starts.push_back(s.ids.size());
    for (std::uint64_t i = 0; i < lengths[e]; ++i) {
      s.ids.push_back(static_cast<std::uint32_t>(100 * e + i));
      s.trained.push_back(i == 0 ? 0 : 1);
    }
  }
  std::vector<TokenSequence> one;
  one.push_back(std::move(s));
  return TokenDataset::from_ids(std::move(one), "examples");
}

TEST(Packing, ALongExampleIsSplitSoThatEachTargetIsTrainedOnce) {
  const std::vector<TokenSpan> pieces = fit_to_context(spans_of({1, 3, 10}), 4);
  // The one-token example predicts nothing; 3 fits; 10 tokens in pieces of
  // 4 starting every 3 tokens: [0,4) [3,7) [6,10).
  const std::vector<TokenSpan> expected = {
      {0, 1, 3}, {0, 4, 4}, {0, 7, 4}, {0, 10, 4}};
  EXPECT_EQ(pieces, expected);
  // Every token after an example's first is the target of exactly one
  // piece (a piece's targets are its tokens after the first).
  std::map<std::uint64_t, int> targeted;
  for (const TokenSpan& p : pieces) {
    for (std::uint64_t i = 1; i < p.count; ++i) {
      ++targeted[p.first + i];
    }
  }
  for (std::uint64_t token = 2; token < 4; ++token) {
    EXPECT_EQ(targeted[token], 1) << token;
  }
  for (std::uint64_t token = 5; token < 14; ++token) {
    EXPECT_EQ(targeted[token], 1) << token;
  }
}

TEST(Packing, BestFitPutsEachExampleInTheFullestRowThatHoldsIt) {
  // Context 10, longest first: 7 opens row 0 (room 3), 6 opens row 1 (room
  // 4), 5 opens row 2 (room 5); 4 fits rows 1 and 2 and goes to row 1 (least
  // room, filled exactly), 3 to row 0 (filled exactly), 2 to row 2.
  const std::vector<PackedRow> rows =
      pack_best_fit(spans_of({3, 7, 2, 6, 4, 5}), 10);
  ASSERT_EQ(rows.size(), 3u);
  auto counts = [](const PackedRow& r) {
    std::vector<std::uint64_t> c;
    for (const TokenSpan& s : r) {
      c.push_back(s.count);
    }
    return c;
  };
  EXPECT_EQ(counts(rows[0]), (std::vector<std::uint64_t>{7, 3}));
  EXPECT_EQ(counts(rows[1]), (std::vector<std::uint64_t>{6, 4}));
  EXPECT_EQ(counts(rows[2]), (std::vector<std::uint64_t>{5, 2}));
}

TEST(Packing, BestFitPlacesEverySpanOnceWithinTheContext) {
  std::vector<std::uint64_t> lengths;
  for (int i = 0; i < 200; ++i) {
    lengths.push_back(2 + (i * 37) % 61);
  }
  const std::vector<TokenSpan> spans = spans_of(lengths);
  const std::vector<PackedRow> rows = pack_best_fit(spans, 64);
  std::multiset<std::uint64_t> placed;
  std::uint64_t tokens = 0;
  for (const PackedRow& r : rows) {
    std::uint64_t n = 0;
    for (const TokenSpan& s : r) {
      placed.insert(s.first);
      n += s.count;
    }
    EXPECT_LE(n, 64u);
    tokens += n;
  }
  EXPECT_EQ(placed.size(), spans.size());
  EXPECT_EQ(
      std::set<std::uint64_t>(placed.begin(), placed.end()).size(),
      spans.size());
  // Close to the bound: the total over the context, rounded up, plus a few.
  const std::uint64_t bound = (tokens + 63) / 64;
  EXPECT_LE(rows.size(), bound + 2);
}

TEST(Packing, APackedRowRestartsPositionsAndNeverTargetsTheNextExample) {
  const auto data = examples({3, 4});
  const PackedRow row = {{0, 0, 3}, {0, 3, 4}};
  std::vector<std::int64_t> in(10), tgt(10), pos(10);
  std::vector<std::int32_t> lengths;
  const std::int64_t trained = read_packed_row(
      *data, row, 10, in.data(), tgt.data(), pos.data(), lengths);
  EXPECT_EQ(
      in, (std::vector<std::int64_t>{0, 1, 2, 100, 101, 102, 103, 0, 0, 0}));
  EXPECT_EQ(pos, (std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 3, 0, 1, 2}));
  // Each example's last token has no target (not 100, the next example's
  // first); the padding has none.
  EXPECT_EQ(
      tgt,
      (std::vector<std::int64_t>{
          1,
          2,
          kNoTarget,
          101,
          102,
          103,
          kNoTarget,
          kNoTarget,
          kNoTarget,
          kNoTarget}));
  EXPECT_EQ(trained, 5);
  EXPECT_EQ(lengths, (std::vector<std::int32_t>{3, 4, 3}));
}

TEST(Packing, TheLoadersPackedBatchesHoldEveryTrainedTargetOnce) {
  const std::vector<std::uint64_t> lengths = {5, 9, 3, 12, 7, 4, 6, 2, 8};
  const auto data = examples(lengths);
  LoaderOptions o;
  o.context = 10;
  o.batch_size = 2;
  o.shuffle = false;
  o.drop_last = false;
  o.packing = Packing::BestFit;
  TokenLoader loader(data, o);
  loader.start_epoch(0);
  std::int64_t trained = 0;
  std::set<std::int64_t> targets;
  while (auto b = loader.next()) {
    ASSERT_TRUE(b->positions.defined());
    EXPECT_EQ(b->positions.sizes(), b->images.sizes());
    // starts: the sequences' starts over the flattened rows, then B x T.
    const at::Tensor starts = b->sequence_starts;
    ASSERT_EQ(starts.scalar_type(), at::kInt);
    EXPECT_EQ(starts[0].item<int>(), 0);
    EXPECT_EQ(starts[-1].item<std::int64_t>(), b->images.numel());
    const at::Tensor flat = b->positions.reshape({-1});
    for (std::int64_t i = 0; i + 1 < starts.size(0); ++i) {
      const int s = starts[i].item<int>();
      EXPECT_EQ(flat[s].item<std::int64_t>(), 0);
      const int n = starts[i + 1].item<int>() - s;
      EXPECT_LE(n, b->longest_sequence);
    }
    const at::Tensor t = b->labels.reshape({-1});
    for (std::int64_t i = 0; i < t.size(0); ++i) {
      const std::int64_t v = t[i].item<std::int64_t>();
      if (v != kNoTarget) {
        EXPECT_TRUE(targets.insert(v).second) << v << " twice";
      }
    }
    EXPECT_EQ(b->trained_targets, t.ne(kNoTarget).sum().item<std::int64_t>());
    trained += b->trained_targets;
  }
  // Every example's tokens after its first are trained: 12 tokens is split
  // (pieces of 10 from 0 and 9), its targets trained once too.
  std::int64_t expected = 0;
  for (const std::uint64_t n : lengths) {
    expected += static_cast<std::int64_t>(n) - 1;
  }
  EXPECT_EQ(trained, expected);
}

// The first batch of `data` packed as `packing`, in order.
Batch first_batch(
    const std::shared_ptr<const TokenDataset>& data,
    Packing packing,
    std::size_t batch) {
  LoaderOptions o;
  o.context = 8;
  o.batch_size = batch;
  o.shuffle = false;
  o.packing = packing;
  TokenLoader loader(data, o);
  loader.start_epoch(0);
  std::optional<Batch> b = loader.next();
  EXPECT_TRUE(b.has_value());
  return b.value_or(Batch{});
}

TEST(Packing, WrapKeepsTodaysWindowsAndNoPositions) {
  const Batch b = first_batch(examples({5, 9, 3, 12}), Packing::Wrap, 1);
  EXPECT_FALSE(b.positions.defined());
  // The first window runs from example 0 into example 1.
  EXPECT_EQ(b.images[0][5].item<std::int64_t>(), 100);
}

TEST(Packing, NoneGivesOneExampleARowWithoutPositions) {
  const Batch b = first_batch(examples({5, 3}), Packing::None, 2);
  // Causal attention keeps an example from the padding after it: no
  // positions needed.
  EXPECT_FALSE(b.positions.defined());
  EXPECT_EQ(b.images[0][0].item<std::int64_t>(), 0);
  EXPECT_EQ(b.images[1][0].item<std::int64_t>(), 100);
  EXPECT_EQ(b.labels[0][4].item<std::int64_t>(), kNoTarget);
  EXPECT_EQ(b.trained_targets, 4 + 2);
}

TEST(Packing, ADocumentEndsWithItsEndTokenWhichPredictsNothing) {
  constexpr std::int64_t kEnd = 2;
  const std::vector<std::int64_t> in = {5, 7, kEnd, 8, 9, kEnd, 1};
  std::vector<std::int64_t> targets = {7, kEnd, 8, 9, kEnd, 1, 4};
  std::vector<std::int64_t> positions(in.size());
  std::vector<std::int32_t> lengths;
  cut_at_document_ends(
      in.data(), 7, kEnd, targets.data(), positions.data(), lengths);
  EXPECT_EQ(positions, (std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(
      targets,
      (std::vector<std::int64_t>{7, kEnd, kNoTarget, 9, kEnd, kNoTarget, 4}));
  EXPECT_EQ(lengths, (std::vector<std::int32_t>{3, 3, 1}));
}

TEST(Packing, TheDocumentMaskCutsWindowsAtTheDataEndOfText) {
  // Token ids of GPT-2's vocabulary: <|endoftext|> (50256) ends documents,
  // as in llm.c's and nanoGPT's shards.
  TokenSequence s;
  s.name = "documents";
  s.ids = {300, 301, 50256, 400, 401, 402, 50256, 500, 501};
  std::vector<TokenSequence> one;
  one.push_back(std::move(s));
  const std::shared_ptr<const TokenDataset> data =
      TokenDataset::from_ids(std::move(one), "documents");
  ASSERT_EQ(data->end_of_text(), 50256);
  LoaderOptions o;
  o.context = 8;
  o.batch_size = 1;
  o.shuffle = false;
  o.document_mask = "eos";
  TokenLoader loader(data, o);
  EXPECT_TRUE(loader.packed_rows());
  loader.start_epoch(0);
  const auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(at::equal(
      b->positions[0], at::tensor({0, 1, 2, 0, 1, 2, 3, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(
      b->labels[0],
      at::tensor(std::vector<std::int64_t>{
          301, 50256, kNoTarget, 401, 402, 50256, kNoTarget, 501})));
  EXPECT_TRUE(
      at::equal(b->sequence_starts, at::tensor({0, 3, 7, 8}, at::kInt)));
  EXPECT_EQ(b->longest_sequence, 4);
  EXPECT_EQ(b->trained_targets, 6);
}

TEST(Packing, TheDocumentMaskSaysWhatItNeeds) {
  EXPECT_FALSE(parse_document_mask("off").on);
  EXPECT_EQ(parse_document_mask("eos").end, -1);
  EXPECT_EQ(parse_document_mask("128001").end, 128001);
  for (const char* bad : {"on", "-3", "12x", ""}) {
    EXPECT_THROW(parse_document_mask(bad), UsageError) << bad;
  }
  // Bytes have no end-of-text token.
  const std::shared_ptr<const TokenDataset> bytes =
      TokenDataset::from_text({{"a", std::string(64, 'x')}}, "bytes");
  LoaderOptions o;
  o.context = 8;
  o.batch_size = 1;
  o.document_mask = "eos";
  EXPECT_THROW(TokenLoader(bytes, o), UsageError);
  o.document_mask = "10";
  EXPECT_TRUE(TokenLoader(bytes, o).packed_rows());
}

} // namespace
} // namespace hotloop::data
