#include <gtest/gtest.h>

#include <filesystem>

#include <ATen/ops/bincount.h>

#include "hotloop/data/sources/fashion_mnist.h"
#include "hotloop/errors.h"
#include "support/idx_files.h"
#include "support/temp_dir.h"

namespace hotloop::data {

namespace {

bool have_debian_data() {
  return std::filesystem::exists(
      std::string(FashionMnist::kDefaultDir) + "/train-images-idx3-ubyte.gz");
}

// A 5-image split in `dir` with the given labels, images 28x28 unless `side`
// says otherwise.
void write_split(
    const test::TempDir& dir,
    const std::string& prefix,
    std::vector<std::uint8_t> labels,
    std::uint32_t images = 5,
    std::uint32_t side = 28) {
  test::write_gzip(
      dir.path() / (prefix + "-images-idx3-ubyte.gz"),
      test::idx_bytes(
          {images, side, side},
          std::vector<std::uint8_t>(images * side * side, 100)));
  const auto n = static_cast<std::uint32_t>(labels.size());
  test::write_bytes(
      dir.path() / (prefix + "-labels-idx1-ubyte"),
      test::idx_bytes({n}, labels));
}

std::string open_error(const std::string& dir, Split split = Split::Train) {
  try {
    FashionMnist ds(dir, split);
    return {};
  } catch (const DataError& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
}

} // namespace

TEST(FashionMnist, ReadsTheRealTrainAndTestSplits) {
  if (!have_debian_data()) {
    GTEST_SKIP()
        << "dataset-fashion-mnist is not installed (scripts/setup installs it)";
  }
  const FashionMnist train(FashionMnist::kDefaultDir, Split::Train);
  const FashionMnist test(FashionMnist::kDefaultDir, Split::Test);
  ASSERT_EQ(train.size(), 60000u);
  ASSERT_EQ(test.size(), 10000u);
  EXPECT_EQ(train.num_classes(), 10u);
  EXPECT_EQ(train.class_names()[9], "Ankle boot");
  // Known values of the published files: first labels, and the first image's
  // pixel sum.
  EXPECT_EQ(train.get(0).label, 9);
  EXPECT_EQ(test.get(1).label, 2);
  const Sample first = train.get(0);
  EXPECT_EQ(first.image.sizes(), (std::vector<std::int64_t>{1, 28, 28}));
  EXPECT_EQ(first.image.scalar_type(), at::kByte);
  EXPECT_EQ(first.image.sum().item<std::int64_t>(), 76247);
  // Balanced: 6000 of each class.
  const at::Tensor counts = at::bincount(train.labels());
  EXPECT_TRUE(counts.eq(6000).all().item<bool>());
  EXPECT_EQ(
      FashionMnist(FashionMnist::kDefaultDir, Split::Val).size(),
      10000u); // val reads the test files
}

TEST(FashionMnist, ReadsRawAndGzipFilesFromAnyFolder) {
  test::TempDir dir;
  write_split(dir, "train", {0, 1, 2, 3, 9});
  const FashionMnist ds(dir.path().string(), Split::Train);
  EXPECT_EQ(ds.size(), 5u);
  EXPECT_EQ(ds.get(4).label, 9);
  EXPECT_EQ(ds.get(2).image.max().item<std::uint8_t>(), 100);
  EXPECT_NE(ds.describe().find("5 images"), std::string::npos);
  EXPECT_THROW(ds.get(5), std::out_of_range);
}

TEST(FashionMnist, LabelOutOfRangeIsAnErrorNamingTheFile) {
  test::TempDir dir;
  write_split(dir, "train", {0, 1, 10, 3, 4});
  const std::string e = open_error(dir.path().string());
  EXPECT_NE(e.find("train-labels-idx1-ubyte"), std::string::npos) << e;
  EXPECT_NE(e.find("label 10 is out of range"), std::string::npos) << e;
}

TEST(FashionMnist, ImageAndLabelCountsMustAgree) {
  test::TempDir dir;
  write_split(dir, "t10k", {0, 1, 2, 3});
  const std::string e = open_error(dir.path().string(), Split::Test);
  EXPECT_NE(e.find("5 images"), std::string::npos) << e;
  EXPECT_NE(e.find("4 labels"), std::string::npos) << e;
}

TEST(FashionMnist, WrongImageSizeIsAnError) {
  test::TempDir dir;
  write_split(dir, "train", {0, 1, 2, 3, 4}, 5, 32);
  EXPECT_NE(open_error(dir.path().string()).find("32x32"), std::string::npos);
}

TEST(FashionMnist, WrongMagicIsAnErrorNamingTheFile) {
  test::TempDir dir;
  write_split(dir, "train", {0, 1, 2, 3, 4});
  auto bytes = test::idx_bytes({5}, {0, 1, 2, 3, 4});
  bytes[2] = 0x0C; // int32 labels: not the format
  test::write_bytes(dir.path() / "train-labels-idx1-ubyte", bytes);
  const std::string e = open_error(dir.path().string());
  EXPECT_NE(e.find("train-labels-idx1-ubyte"), std::string::npos) << e;
  EXPECT_NE(e.find("element type"), std::string::npos) << e;
}

TEST(
    FashionMnist,
    MissingFilesSayWhereTheyWereLookedForAndHowToPointElsewhere) {
  test::TempDir dir;
  const std::string e = open_error(dir.path().string());
  EXPECT_NE(e.find("train-images-idx3-ubyte"), std::string::npos) << e;
  EXPECT_NE(e.find(dir.path().string()), std::string::npos) << e;
  EXPECT_NE(e.find("fashion-mnist:DIR"), std::string::npos) << e;
}

} // namespace hotloop::data
