// Text -> tokens: GPT-2's pre-tokenizer pieces, the Unicode classes behind
// them, byte-level BPE merges by rank, a lossless round trip of any bytes,
// what bad tokenizer files say, and pack/TokenDataset with a BPE tokenizer.
// (tests/data/bpe_hf.py checks the ids against Hugging Face tokenizers.)

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/tokens/pack_text.h"
#include "hotloop/data/tokens/pretokenize.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"
#include "support/byte_stand_ins.h"
#include "support/temp_dir.h"

namespace hotloop::data {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  gpt2_pretokenize(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Pretokenize, WordsKeepTheirLeadingSpace) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("abc123 456!?"), (Pieces{"abc", "123", " 456", "!?"}));
  EXPECT_EQ(pieces(" (x)"), (Pieces{" (", "x", ")"}));
}

// SmolLM2's Digits before GPT-2's pattern: numbers come out first (each digit
// alone, or each run), and the text between them is cut by GPT-2's pattern
// on its own (so " 456" loses its space to the piece before).
TEST(Pretokenize, DigitsComeOutBeforeGpt2sPattern) {
  auto cut = [](std::string_view text, bool individual) {
    std::vector<std::string> out;
    digits_gpt2_pretokenize(
        text, individual, [&](std::string_view p) { out.emplace_back(p); });
    return out;
  };
  EXPECT_EQ(
      cut("abc123 456!?", true),
      (Pieces{"abc", "1", "2", "3", " ", "4", "5", "6", "!?"}));
  EXPECT_EQ(
      cut("abc123 456!?", false), (Pieces{"abc", "123", " ", "456", "!?"}));
  // Unicode numbers too (Ⅻ is N*), and text without numbers as GPT-2's.
  EXPECT_EQ(cut("x\u216By", true), (Pieces{"x", "\u216B", "y"}));
  EXPECT_EQ(cut("Hello world", true), pieces("Hello world"));
}

TEST(Pretokenize, ContractionsAreTheirOwnPieces) {
  EXPECT_EQ(pieces("don't"), (Pieces{"don", "'t"}));
  EXPECT_EQ(
      pieces("we'll they're I've"),
      (Pieces{"we", "'ll", " they", "'re", " I", "'ve"}));
  // Case-sensitive, as GPT-2's pattern: 'LL is punctuation then letters.
  EXPECT_EQ(pieces("WE'LL"), (Pieces{"WE", "'", "LL"}));
  // At any position: 'sun starts with 's.
  EXPECT_EQ(pieces("'sun"), (Pieces{"'s", "un"}));
}

TEST(Pretokenize, ARunOfSpacesLeavesItsLastToTheNextWord) {
  EXPECT_EQ(pieces("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pieces("a \tb"), (Pieces{"a", " ", "\t", "b"}));
  EXPECT_EQ(pieces("end  "), (Pieces{"end", "  "})); // at the end: all
  EXPECT_EQ(pieces("\n"), (Pieces{"\n"}));
}

TEST(Pretokenize, UnicodeLettersNumbersAndSpaces) {
  EXPECT_EQ(pieces("naïve 日本語"), (Pieces{"naïve", " 日本語"}));
  EXPECT_EQ(pieces("x½²"), (Pieces{"x", "½²"})); // numbers (No)
  // U+00A0 and U+3000 are White_Space but not U+0020: no leading space.
  EXPECT_EQ(pieces("a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));
  EXPECT_EQ(pieces("🙂🙂 ok"), (Pieces{"🙂🙂", " ok"}));
}

TEST(Pretokenize, InvalidUtf8IsKeptByteByByte) {
  const std::string bad = "ok\xff\xfe\xc3 x\xe6\x97";
  const Pieces p = pieces(bad);
  EXPECT_EQ(p, (Pieces{"ok", "\xff\xfe\xc3", " x", "\xe6\x97"}));
  std::string joined;
  for (const auto& s : p) {
    joined += s;
  }
  EXPECT_EQ(joined, bad);
}

TEST(UnicodeClassTable, KnowsLettersNumbersAndWhiteSpace) {
  EXPECT_EQ(unicode_class(U'a'), UnicodeClass::Letter);
  EXPECT_EQ(unicode_class(U'Ω'), UnicodeClass::Letter);
  EXPECT_EQ(unicode_class(U'語'), UnicodeClass::Letter);
  EXPECT_EQ(unicode_class(U'7'), UnicodeClass::Number);
  EXPECT_EQ(unicode_class(U'½'), UnicodeClass::Number);
  EXPECT_EQ(unicode_class(U'٣'), UnicodeClass::Number);
  EXPECT_EQ(unicode_class(0x3000), UnicodeClass::Space);
  EXPECT_EQ(unicode_class(U'\t'), UnicodeClass::Space);
  EXPECT_EQ(unicode_class(U'!'), UnicodeClass::Other);
  EXPECT_EQ(unicode_class(0x1F642), UnicodeClass::Other); // 🙂
  EXPECT_EQ(unicode_class(0x10FFFF), UnicodeClass::Other);
}

using test::stand_in;

// A byte-level vocabulary: the 256 bytes (ids 0..255), then `extra` tokens,
// and merges.txt with `merges` in rank order.
std::string write_bpe(
    const test::TempDir& dir,
    const std::vector<std::string>& extra,
    const std::vector<std::string>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[stand_in(b)] = b;
  }
  int id = 256;
  for (const auto& t : extra) {
    vocab[t] = id++;
  }
  dir.write("bpe/vocab.json", vocab.dump());
  std::string m = "#version: 0.2\n";
  for (const auto& line : merges) {
    m += line + "\n";
  }
  dir.write("bpe/merges.txt", m);
  return (dir.path() / "bpe").string();
}

TEST(BpeTokenizer, MergesTheLowestRankedPairFirst) {
  test::TempDir dir;
  // "l l" outranks "e l": "ell" is e + ll, never el + l; "hell" is he + ll.
  Tokenizer t = Tokenizer::bpe(write_bpe(
      dir,
      {"ll", "el", "ell", "he", "hell"},
      {"l l", "h e", "he ll", "e l", "e ll"}));
  EXPECT_EQ(t.encode("ell"), (std::vector<std::int32_t>{258}));
  EXPECT_EQ(t.encode("hello"), (std::vector<std::int32_t>{260, 'o'}));
  // Pieces are merged on their own: the space stays with " hell".
  EXPECT_EQ(t.encode("hell hell"), (std::vector<std::int32_t>{260, ' ', 260}));
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.decode(260), "hell");
  EXPECT_EQ(t.spec(), "bpe:" + (dir.path() / "bpe").string());
}

TEST(BpeTokenizer, AnyBytesRoundTrip) {
  test::TempDir dir;
  Tokenizer t = Tokenizer::bpe(
      write_bpe(dir, {"Ġt", "he", "Ġthe"}, {"Ġ t", "h e", "Ġt he"}));
  std::mt19937 rng(3);
  std::string bytes;
  for (int i = 0; i < 4096; ++i) {
    bytes += static_cast<char>(rng() & 0xff);
  }
  bytes += " the";
  const std::vector<std::int32_t> ids = t.encode(bytes);
  EXPECT_EQ(t.decode(std::vector<std::int64_t>(ids.begin(), ids.end())), bytes);
  EXPECT_EQ(ids.back(), 258); // " the"
}

TEST(BpeTokenizer, BytesTokenizerIsTheIdentity) {
  Tokenizer t = Tokenizer::parse("bytes");
  EXPECT_TRUE(t.byte_level());
  EXPECT_EQ(t.encode("A\xff"), (std::vector<std::int32_t>{65, 255}));
  EXPECT_EQ(t.decode(std::vector<std::int64_t>{72, 105}), "Hi");
  EXPECT_EQ(t.vocab_size(), 256);
}

template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BpeTokenizer, BadFilesSayWhatAndWhere) {
  test::TempDir dir;
  const std::string good = write_bpe(dir, {"ab"}, {"a b"});
  EXPECT_NE(
      error_of<UsageError>([] {
        Tokenizer::parse("wordpiece:x");
      }).find("expected bytes, bpe:DIR or hf:DIR"),
      std::string::npos);
  EXPECT_NE(
      error_of<DataError>([&] {
        Tokenizer::bpe((dir.path() / "nowhere").string());
      }).find("no vocab.json"),
      std::string::npos);

  dir.write("bpe/merges.txt", "#version: 0.2\na b\nc zz\n");
  const std::string unknown =
      error_of<DataError>([&] { Tokenizer::bpe(good); });
  EXPECT_NE(unknown.find("merges.txt line 3"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\"zz\""), std::string::npos) << unknown;

  dir.write("bpe/merges.txt", "#version: 0.2\nab\n");
  EXPECT_NE(
      error_of<DataError>([&] {
        Tokenizer::bpe(good);
      }).find("expected two tokens separated by one space"),
      std::string::npos);

  dir.write("bpe/merges.txt", "a b\n");
  dir.write("bpe/vocab.json", "{\"a\": 0,");
  EXPECT_NE(
      error_of<DataError>([&] {
        Tokenizer::bpe(good);
      }).find("vocab.json: not valid JSON"),
      std::string::npos);

  dir.write("bpe/vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  EXPECT_NE(
      error_of<DataError>([&] {
        Tokenizer::bpe(good);
      }).find("no token for byte 0x00"),
      std::string::npos);

  // An id past any real vocabulary is refused before a table of that many
  // tokens is made (2^31 ids would be 64 GiB; 2 x 10^7 is past the bound).
  dir.write("bpe/vocab.json", R"({"a": 0, "b": 20000000})");
  EXPECT_NE(
      error_of<DataError>([&] {
        Tokenizer::bpe(good);
      }).find("has id 20000000, expected an integer from 0 to 16777215"),
      std::string::npos);
}

TEST(PackTextBpe, ShardsHoldTheTokenizersIdsAndTheFolderItsVocabulary) {
  test::TempDir dir;
  const std::string bpe = write_bpe(
      dir,
      {"ll", "el", "ell", "he", "hell"},
      {"l l", "h e", "he ll", "e l", "e ll"});
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text += "hello hell\n";
  }
  dir.write("in/a.txt", text);
  PackTextOptions o;
  o.inputs = {(dir.path() / "in").string()};
  o.out = (dir.path() / "out").string();
  o.tokenizer = "bpe:" + bpe;
  o.progress = false;
  const PackTextResult r = pack_text(o);
  EXPECT_EQ(r.vocab, 261);
  // "hello" = hell o; " hell" = Ġ hell; "\n": 5 tokens a line.
  EXPECT_EQ(r.train_tokens + r.val_tokens, 50u * 5);
  const auto train =
      open_dataset(parse_data_spec("tokens:" + o.out), Split::Train, 0);
  const auto* tokens = dynamic_cast<const TokenDataset*>(train.get());
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->vocabulary_hint(), 261);
  EXPECT_EQ(tokens->get(0).label, 260);

  // Bytes into a folder that holds a BPE tokenizer would be misread.
  o.tokenizer = "bytes";
  EXPECT_NE(
      error_of<UsageError>([&] { pack_text(o); }).find("holds a BPE tokenizer"),
      std::string::npos);

  // Ids past uint16 go in uint32 shards (llm.c's Llama 3 format) and read
  // back the same:
  // "hh" is the last of 65,793 tokens.
  std::vector<std::string> many;
  for (int i = 0; i < 65536; ++i) {
    many.push_back(fmt::format("t{}", i));
  }
  many.push_back("hh");
  test::TempDir big;
  o.tokenizer = "bpe:" + write_bpe(big, many, {"h h"});
  std::string hh;
  for (int i = 0; i < 50; ++i) {
    hh += "hh\n";
  }
  big.write("in/b.txt", hh);
  o.inputs = {(big.path() / "in").string()};
  o.out = (big.path() / "out").string();
  EXPECT_EQ(pack_text(o).vocab, 256 + 65537);
  const auto wide =
      open_dataset(parse_data_spec("tokens:" + o.out), Split::Train, 0);
  const auto* wide_tokens = dynamic_cast<const TokenDataset*>(wide.get());
  ASSERT_NE(wide_tokens, nullptr);
  EXPECT_EQ(wide_tokens->shards().front().token_bytes, 4u);
  EXPECT_EQ(wide_tokens->get(0).label, 256 + 65536); // "hh"
  EXPECT_EQ(wide_tokens->get(1).label, '\n');
}

} // namespace
} // namespace hotloop::data
