// Token data: llm.c shards and nanoGPT's headerless files, what a bad file
// says, the split names, byte-level text and the built-in corpus, and the
// token loader's windows, order, rank split and exact resume.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/tokens/pack_text.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/token_loader.h"
#include "hotloop/errors.h"
#include "support/temp_dir.h"

namespace hotloop::data {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> llmc_bytes(
    const std::vector<std::uint16_t>& tokens,
    std::int32_t magic = 20240520,
    std::int32_t version = 1,
    std::int64_t count = -1) {
  std::vector<std::int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<std::int32_t>(
      count >= 0 ? count : static_cast<std::int64_t>(tokens.size()));
  std::vector<std::uint8_t> out(1024 + 2 * tokens.size());
  std::memcpy(out.data(), header.data(), 1024);
  if (!tokens.empty()) { // an empty vector's data() may be null: no memcpy
    std::memcpy(out.data() + 1024, tokens.data(), 2 * tokens.size());
  }
  return out;
}

std::vector<std::uint8_t> raw_bytes(const std::vector<std::uint16_t>& tokens) {
  std::vector<std::uint8_t> out(2 * tokens.size());
  if (!tokens.empty()) {
    std::memcpy(out.data(), tokens.data(), out.size());
  }
  return out;
}

std::vector<std::uint16_t> iota(std::size_t n, std::uint16_t start = 0) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::uint16_t>((start + i) % 1000);
  }
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(TokenData, ReadsLlmcShardsAndHeaderlessFilesAlike) {
  test::TempDir dir;
  test::write_bytes(dir.path() / "a_train_000.bin", llmc_bytes(iota(100)));
  test::write_bytes(dir.path() / "train.bin", raw_bytes(iota(100)));
  for (const char* name : {"a_train_000.bin", "train.bin"}) {
    const auto d =
        TokenDataset::open_files({(dir.path() / name).string()}, name);
    EXPECT_EQ(d->size(), 100u) << name;
    EXPECT_EQ(d->get(42).label, 42) << name;
    EXPECT_EQ(d->max_token(), 99) << name;
    EXPECT_EQ(d->shards().front().header_bytes, name[0] == 'a' ? 1024u : 0u);
    // Windows of 10 + 1 tokens, starting every 10: 99 / 10 = 9 of them.
    EXPECT_EQ(d->windows(10), 9u);
    std::vector<std::int64_t> w(11);
    d->read_window(3, 10, w.data());
    EXPECT_EQ(w.front(), 30);
    EXPECT_EQ(w.back(), 40);
  }
}

TEST(TokenData, Uint32ShardsHoldIdsPastUint16) {
  // llm.c's Llama 3 shards: magic 20240801, version 7, then uint32 ids
  // (vocabularies past 65536, as Llama 3's and Qwen2's are).
  std::vector<std::uint32_t> ids(50);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::uint32_t>(i % 7 == 3 ? 100000 + i : i);
  }
  std::vector<std::int32_t> header(256, 0);
  header[0] = 20240801;
  header[1] = 7;
  header[2] = static_cast<std::int32_t>(ids.size());
  std::vector<std::uint8_t> bytes(1024 + 4 * ids.size());
  std::memcpy(bytes.data(), header.data(), 1024);
  std::memcpy(bytes.data() + 1024, ids.data(), 4 * ids.size());
  test::TempDir dir;
  test::write_bytes(dir.path() / "w_train.bin", bytes);
  const auto d =
      TokenDataset::open_files({(dir.path() / "w_train.bin").string()}, "wide");
  EXPECT_EQ(d->size(), 50u);
  EXPECT_EQ(d->max_token(), 100045);
  EXPECT_EQ(d->get(10).label, 100010);
  std::vector<std::int64_t> w(11);
  d->read_window(1, 10, w.data());
  EXPECT_EQ(w[0], 100010);
  EXPECT_EQ(w[1], 11);
  // Token 3 is the first too large for 1000 ids: at byte 1024 + 4 * 3.
  const std::string e = error_of([&] { d->check_vocabulary(1000); });
  EXPECT_NE(e.find("token id 100003 at token 3 (byte 1036)"), std::string::npos)
      << e;
  // Cut short: the count says 50 uint32s.
  bytes.resize(1024 + 4 * 30);
  test::write_bytes(dir.path() / "cut_train.bin", bytes);
  EXPECT_NE(
      error_of([&] {
        TokenDataset::open_files(
            {(dir.path() / "cut_train.bin").string()}, "x");
      }).find("truncated: it ends in token 30"),
      std::string::npos);
}

TEST(TokenData, ABadFileIsAnErrorNamingTheFileAndTheOffset) {
  test::TempDir dir;
  const auto path = [&](const char* n) { return (dir.path() / n).string(); };
  test::write_bytes(path("version.bin"), llmc_bytes(iota(10), 20240520, 3));
  EXPECT_NE(
      error_of([&] {
        TokenDataset::open_files({path("version.bin")}, "x");
      }).find("version.bin: llm.c header version 3 at byte 4"),
      std::string::npos);
  // The header promises 100 tokens, 60 are there.
  auto cut = llmc_bytes(iota(100));
  cut.resize(1024 + 120);
  test::write_bytes(path("cut.bin"), cut);
  const std::string e =
      error_of([&] { TokenDataset::open_files({path("cut.bin")}, "x"); });
  EXPECT_NE(
      e.find("cut.bin: the header (byte 8) says 100 tokens"), std::string::npos)
      << e;
  EXPECT_NE(e.find("truncated: it ends in token 60"), std::string::npos) << e;
  // A headerless file of an odd length.
  auto odd = raw_bytes(iota(10));
  odd.push_back(7);
  test::write_bytes(path("odd.bin"), odd);
  EXPECT_NE(
      error_of([&] {
        TokenDataset::open_files({path("odd.bin")}, "x");
      }).find("odd.bin: 21 bytes is not a whole number of uint16 tokens"),
      std::string::npos);
  auto short_header = llmc_bytes({});
  short_header.resize(512);
  test::write_bytes(path("short.bin"), short_header);
  EXPECT_NE(
      error_of([&] {
        TokenDataset::open_files({path("short.bin")}, "x");
      }).find("truncated llm.c header"),
      std::string::npos);
  EXPECT_NE(
      error_of([&] {
        TokenDataset::open_files({path("none.bin")}, "x");
      }).find("cannot open token file"),
      std::string::npos);
}

// Each refusal says what (and where) and how to fix it.
TEST(
    TokenData,
    AFileTooShortOrWithANegativeCountOrNoValSplitIsRefusedWithAFix) {
  test::TempDir dir;
  const auto path = [&](const char* n) { return (dir.path() / n).string(); };
  test::write_bytes(path("one.bin"), raw_bytes({7}));
  auto bytes = llmc_bytes(iota(4));
  const std::int32_t negative = -5;
  std::memcpy(bytes.data() + 8, &negative, 4);
  test::write_bytes(path("negative.bin"), bytes);
  test::write_bytes(path("lone_train.bin"), llmc_bytes(iota(10)));
  struct Case {
    std::function<void()> open;
    const char* what;
    const char* fix;
  };
  const Case cases[] = {
      {[&] { TokenDataset::open_files({path("one.bin")}, "x"); },
       "one.bin: 1 token(s): a window needs at least 2",
       "leave the file out"},
      {[&] { TokenDataset::open_files({path("negative.bin")}, "x"); },
       "negative.bin: the header's token count at byte 8 is negative (-5)",
       "write the file again"},
      {[&] { token_files(path("lone_train.bin"), Split::Val); },
       "lone_train.bin: no val counterpart",
       "--no-eval"},
  };
  for (const Case& c : cases) {
    try {
      c.open();
      ADD_FAILURE() << "accepted: " << c.what;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(c.what), std::string::npos)
          << e.what();
      EXPECT_NE(e.hint().find(c.fix), std::string::npos) << e.hint();
    }
  }
}

TEST(TokenData, ATokenOutsideTheVocabularyIsNamedWithItsOffset) {
  test::TempDir dir;
  std::vector<std::uint16_t> t = iota(50);
  t[37] = 300;
  test::write_bytes(dir.path() / "train.bin", llmc_bytes(t));
  const auto d =
      TokenDataset::open_files({(dir.path() / "train.bin").string()}, "tokens");
  EXPECT_NO_THROW(d->check_vocabulary(301));
  const std::string e = error_of([&] { d->check_vocabulary(256); });
  EXPECT_NE(
      e.find(
          "train.bin: token id 300 at token 37 (byte 1098) is outside the model's vocabulary of 256"),
      std::string::npos)
      << e;
  EXPECT_EQ(d->vocabulary_hint(), 50257); // above 255: GPT-2's tokenizer
}

TEST(TokenData, SplitsAreFoundByName) {
  test::TempDir dir;
  for (const char* n :
       {"fw_train_000.bin", "fw_train_001.bin", "fw_val_000.bin"}) {
    test::write_bytes(dir.path() / n, llmc_bytes(iota(20)));
  }
  const std::string d = dir.path().string();
  EXPECT_EQ(token_files(d, Split::Train).size(), 2u);
  ASSERT_EQ(token_files(d, Split::Val).size(), 1u);
  EXPECT_TRUE(token_files(d, Split::Val)[0].ends_with("fw_val_000.bin"));
  // A file's val counterpart, and a glob's.
  EXPECT_TRUE(token_files(d + "/fw_train_000.bin", Split::Val)[0].ends_with(
      "fw_val_000.bin"));
  EXPECT_EQ(token_files(d + "/fw_train_*.bin", Split::Train).size(), 2u);
  EXPECT_THROW(token_files(d + "/nothing_*.bin", Split::Train), DataError);
  // Through --data, the train split's description counts every shard.
  const auto train =
      open_dataset(parse_data_spec("tokens:" + d), Split::Train, 0);
  EXPECT_NE(
      train->describe().find("40 tokens in 2 shard(s)"), std::string::npos)
      << train->describe();
}

TEST(TokenData, TextIsBytesAndEachFileKeepsItsLastTenthForValidation) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text += "line " + std::to_string(i) + "\n";
  }
  dir.write("a.txt", text);
  const auto train = open_text(dir.path().string(), Split::Train);
  const auto val = open_text(dir.path().string(), Split::Val);
  EXPECT_TRUE(train->byte_level());
  EXPECT_EQ(train->size() + val->size(), text.size());
  EXPECT_EQ(train->get(0).label, 'l');
  EXPECT_EQ(val->get(0).label, 'l'); // the cut is at a line's start
  EXPECT_NEAR(
      static_cast<double>(val->size()) / static_cast<double>(text.size()),
      0.1,
      0.02);
  EXPECT_EQ(train->vocabulary_hint(), 256);
}

TEST(TokenData, TheBuiltInCorpusIsDebiansFortunes) {
  // scripts/setup installs the fortunes package.
  const auto train =
      open_dataset(parse_data_spec("text:fortunes"), Split::Train, 0);
  const auto val =
      open_dataset(parse_data_spec("text:fortunes"), Split::Val, 0);
  EXPECT_GT(train->size(), 2'000'000u); // about 2.5 MB of English text
  EXPECT_GT(val->size(), 200'000u);
  EXPECT_NE(train->describe().find("bytes, vocabulary 256"), std::string::npos);
  EXPECT_EQ(
      error_of([] {
        open_text("/nonexistent-corpus", Split::Train);
      }).find("text:/nonexistent-corpus"),
      0u);
}

// A loader over 1000 tokens 0..999: window w holds w*8 .. w*8+8.
struct Loaders {
  std::shared_ptr<TokenDataset> data;
  Loaders() {
    test::TempDir dir;
    test::write_bytes(dir.path() / "t.bin", raw_bytes(iota(1000)));
    data = TokenDataset::open_files({(dir.path() / "t.bin").string()}, "t");
  }
  TokenLoader make(int rank = 0, int world = 1, bool shuffle = true) const {
    LoaderOptions o;
    o.batch_size = 4;
    o.context = 8;
    o.seed = 3;
    o.rank = rank;
    o.world_size = world;
    o.shuffle = shuffle;
    return TokenLoader(data, o);
  }
};

std::vector<std::int64_t> firsts(const Batch& b) {
  const at::Tensor f = b.images.select(1, 0).contiguous();
  return {f.data_ptr<std::int64_t>(), f.data_ptr<std::int64_t>() + f.numel()};
}

TEST(TokenLoader, SamplesAreWindowsAndTheTargetsAreTheNextTokens) {
  const Loaders l;
  TokenLoader loader = l.make();
  EXPECT_EQ(loader.batches_per_epoch(), 124u / 4); // 999 / 8 windows
  loader.start_epoch(0);
  const Batch b = *loader.next();
  EXPECT_EQ(b.images.sizes(), (at::IntArrayRef{4, 8}));
  EXPECT_EQ(b.labels.sizes(), (at::IntArrayRef{4, 8}));
  EXPECT_EQ(b.images.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(b.labels.narrow(1, 0, 7), b.images.narrow(1, 1, 7)));
  EXPECT_TRUE(at::equal(b.labels.select(1, 7), b.images.select(1, 0) + 8));
  for (const auto f : firsts(b)) {
    EXPECT_EQ(f % 8, 0); // windows start every `context` tokens
  }
}

TEST(TokenLoader, TheOrderIsAFunctionOfSeedAndEpochAndResumesExactly) {
  const Loaders l;
  auto epoch = [&](std::size_t e, std::size_t from = 0) {
    TokenLoader loader = l.make();
    loader.start_epoch(e, from);
    std::vector<std::int64_t> out;
    while (auto b = loader.next()) {
      const auto f = firsts(*b);
      out.insert(out.end(), f.begin(), f.end());
    }
    return out;
  };
  const auto e0 = epoch(0);
  EXPECT_EQ(e0, epoch(0));
  EXPECT_NE(e0, epoch(1));
  EXPECT_EQ(std::set<std::int64_t>(e0.begin(), e0.end()).size(), e0.size());
  // Resumed at batch 5: the rest of the same epoch.
  const auto rest = epoch(0, 5);
  EXPECT_EQ(rest, std::vector<std::int64_t>(e0.begin() + 20, e0.end()));
}

TEST(TokenLoader, RanksReadDisjointPartsOfEachGlobalBatch) {
  const Loaders l;
  TokenLoader one = l.make();
  TokenLoader r0 = l.make(0, 2);
  TokenLoader r1 = l.make(1, 2);
  for (auto* x : {&one, &r0, &r1}) {
    x->start_epoch(0);
  }
  // Global batch 0 of two ranks = batches 0 and 1 of one rank.
  auto a = firsts(*one.next());
  const auto b = firsts(*one.next());
  a.insert(a.end(), b.begin(), b.end());
  auto ranks = firsts(*r0.next());
  const auto second = firsts(*r1.next());
  ranks.insert(ranks.end(), second.begin(), second.end());
  EXPECT_EQ(ranks, a);
}

TEST(TokenLoader, AnEvaluationCapReadsEvenlySpacedWindows) {
  const Loaders l;
  LoaderOptions o;
  o.batch_size = 10;
  o.context = 8;
  o.shuffle = false;
  o.drop_last = false;
  o.max_samples = 10;
  TokenLoader loader(l.data, o);
  EXPECT_EQ(loader.batches_per_epoch(), 1u);
  loader.start_epoch(0);
  const auto f = firsts(*loader.next());
  ASSERT_EQ(f.size(), 10u);
  EXPECT_EQ(f[1], 12 * 8); // window 124 * 1 / 10
  EXPECT_EQ(f[9], 111 * 8);
  EXPECT_FALSE(loader.next());
}

TEST(TokenLoader, FewerWindowsThanOneBatchIsAUsageError) {
  const Loaders l;
  LoaderOptions o;
  o.batch_size = 200;
  o.context = 8;
  EXPECT_THROW(TokenLoader(l.data, o), UsageError);
}

} // namespace
} // namespace hotloop::data

namespace hotloop::data {

TEST(PackText, AShardSizeOutsideWhatTheHeaderHoldsIsBadUsage) {
  test::TempDir dir;
  dir.write("in/a.txt", "some text\n");
  for (const std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1} << 31}) {
    PackTextOptions o;
    o.inputs = {(dir.path() / "in").string()};
    o.out = (dir.path() / "out").string();
    o.shard_tokens = n;
    o.progress = false;
    try {
      pack_text(o);
      ADD_FAILURE() << "--shard-tokens " << n << " was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(
          std::string(e.what()).find(
              "--shard-tokens " + std::to_string(n) +
              ": expected 2 to 2^31 - 1"),
          std::string::npos)
          << e.what();
      EXPECT_NE(e.hint().find("100000000"), std::string::npos) << e.hint();
    }
    EXPECT_FALSE(fs::exists(dir.path() / "out")) << n;
  }
}

TEST(PackText, WritesLlmcShardsThatReadBackAsTheTextsBytes) {
  test::TempDir dir;
  std::string a;
  for (int i = 0; i < 50; ++i) {
    a += "line " + std::to_string(i) + "\n";
  }
  dir.write("in/a.txt", a);
  dir.write("in/sub/b.txt", "hello world\nsecond line\n");
  PackTextOptions o;
  o.inputs = {(dir.path() / "in").string()};
  o.out = (dir.path() / "out").string();
  o.shard_tokens = 100; // several train shards
  o.progress = false;
  const PackTextResult r = pack_text(o);
  EXPECT_EQ(r.files, 2u);
  EXPECT_EQ(r.bytes, a.size() + 24);
  EXPECT_EQ(r.train_tokens + r.val_tokens, r.bytes);
  EXPECT_EQ(
      r.train_tokens,
      train_share(a) + train_share("hello world\nsecond line\n"));
  // Read back through --data tokens:OUT: the same bytes, in order.
  const auto train =
      open_dataset(parse_data_spec("tokens:" + o.out), Split::Train);
  const auto val = open_dataset(parse_data_spec("tokens:" + o.out), Split::Val);
  ASSERT_EQ(train->size(), r.train_tokens);
  EXPECT_EQ(val->size(), r.val_tokens);
  EXPECT_GT(static_cast<const TokenDataset&>(*train).shards().size(), 1u);
  std::string back;
  for (std::size_t i = 0; i < train_share(a); ++i) {
    back += static_cast<char>(train->get(i).label);
  }
  EXPECT_EQ(back, a.substr(0, train_share(a)));
  EXPECT_THROW(pack_text({{(dir.path() / "none").string()}, o.out}), DataError);
}

} // namespace hotloop::data
