#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "hotloop/data/data_kinds.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/sources/fashion_mnist.h"
#include "hotloop/errors.h"
#include "test_paths.h"

namespace hotloop::data {

TEST(DataSpec, ParsesEveryForm) {
  DataSpec s = parse_data_spec("fashion-mnist");
  EXPECT_EQ(s.kind, DataSpec::Kind::FashionMnist);
  EXPECT_EQ(s.path, FashionMnist::kDefaultDir);
  EXPECT_EQ(parse_data_spec("fashion-mnist:/tmp/fm").path, "/tmp/fm");
  EXPECT_EQ(parse_data_spec("folder:/photos").kind, DataSpec::Kind::Folder);
  s = parse_data_spec("wds:/shards/train-*.tar");
  EXPECT_EQ(s.kind, DataSpec::Kind::WebDataset);
  EXPECT_EQ(s.path, "/shards/train-*.tar");
  s = parse_data_spec("synthetic:1000");
  EXPECT_EQ(s.kind, DataSpec::Kind::Synthetic);
  EXPECT_EQ(s.synthetic_count, 1000u);
  EXPECT_EQ(s.synthetic_shape, (ImageShape{3, 224, 224}));
  s = parse_data_spec("synthetic:64x1x28x28");
  EXPECT_EQ(s.synthetic_count, 64u);
  EXPECT_EQ(s.synthetic_shape, (ImageShape{1, 28, 28}));
}

TEST(DataSpec, BadSpecsAreUsageErrorsThatListTheForms) {
  for (const char* bad :
       {"",
        "imagenet:/x",
        "folder:",
        "synthetic",
        "synthetic:0",
        "synthetic:10x3x32",
        "synthetic:ten",
        "synthetic:10x3x-1x4",
        "synthetic:10x"}) {
    try {
      parse_data_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      for (const DataKind& k : data_kinds()) {
        EXPECT_NE(e.hint().find(k.form), std::string::npos) << bad;
      }
    }
  }
}

// The table is the parser's: each prefix gives its kind, a form without its
// path is refused exactly where the entry says so.
TEST(DataSpec, EachKindOfTheTableParsesByItsPrefix) {
  for (const DataKind& k : data_kinds()) {
    const std::string one = k.kind == DataSpec::Kind::Synthetic ? "8" : "/x";
    EXPECT_EQ(parse_data_spec(std::string(k.prefix) + ":" + one).kind, k.kind)
        << k.prefix;
    EXPECT_EQ(&data_kind(k.kind), &k);
    if (k.needs_path) {
      EXPECT_THROW(parse_data_spec(std::string(k.prefix) + ":"), UsageError)
          << k.prefix;
    }
  }
  EXPECT_EQ(data_forms(DataFor::Images).find("tokens:"), std::string::npos);
  EXPECT_NE(
      data_forms(DataFor::Tokens).find("instruct:FILE|DIR"), std::string::npos);
}

// The pages that list the forms list every one, as the table writes it
// (a markdown table escapes its |).
TEST(DataSpec, TheDocsListEveryFormOfTheTable) {
  for (const char* page : {"data.md", "python.md"}) {
    std::ifstream in(std::string(HOTLOOP_TEST_SOURCE_DIR) + "/../docs/" + page);
    ASSERT_TRUE(in) << page;
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (const DataKind& k : data_kinds()) {
      std::string form;
      for (const char* c = k.form; *c != '\0'; ++c) {
        form += *c == '|' ? std::string("\\|") : std::string(1, *c);
      }
      EXPECT_NE(text.find("`" + form + "`"), std::string::npos)
          << page << " does not list `" << form << "`";
    }
  }
}

TEST(DataSpec, OpensSyntheticWithADifferentSeedPerSplit) {
  const DataSpec s = parse_data_spec("synthetic:10x1x4x4");
  const auto train = open_dataset(s, Split::Train, 1);
  const auto test = open_dataset(s, Split::Test, 1);
  EXPECT_EQ(train->size(), 10u);
  EXPECT_FALSE(train->get(0).image.equal(test->get(0).image));
}

TEST(DataSpec, WdsWithoutShardsSaysHowToMakeThem) {
  try {
    open_dataset(parse_data_spec("wds:/nonexistent/shards"), Split::Train);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(e.hint().find("hotloop pack"), std::string::npos) << e.hint();
  }
}

} // namespace hotloop::data
