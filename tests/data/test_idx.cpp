#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "hotloop/data/sources/idx.h"
#include "hotloop/errors.h"
#include "support/idx_files.h"
#include "support/temp_dir.h"

namespace hotloop::data {

using test::idx_bytes;

namespace {

// The DataError message parse_idx throws for `bytes`, or "" when it parses.
std::string parse_error(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_idx(bytes, "/data/x-idx3-ubyte");
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(Idx, ParsesHeaderDimensionsAndDataOffset) {
  const auto bytes = idx_bytes({2, 2, 3}, std::vector<std::uint8_t>(12, 7));
  const IdxHeader h = parse_idx(bytes, "f");
  EXPECT_EQ(h.dims, (std::vector<std::uint32_t>{2, 2, 3}));
  EXPECT_EQ(h.data_offset, 16u);
  EXPECT_EQ(h.element_count, 12u);
}

TEST(Idx, EveryMalformedHeaderIsADataErrorNamingTheFileAndTheProblem) {
  auto bytes = idx_bytes({2, 2}, std::vector<std::uint8_t>(4, 0));
  auto wrong_magic = bytes;
  wrong_magic[0] = 0x1f;
  EXPECT_NE(parse_error(wrong_magic).find("magic number"), std::string::npos);
  EXPECT_NE(
      parse_error(wrong_magic).find("/data/x-idx3-ubyte"), std::string::npos);
  auto float_type = bytes;
  float_type[2] = 0x0D;
  EXPECT_NE(
      parse_error(float_type).find("element type 0x0d"), std::string::npos);
  auto no_dims = bytes;
  no_dims[3] = 0;
  EXPECT_NE(parse_error(no_dims).find("0 dimensions"), std::string::npos);
  EXPECT_NE(
      parse_error({0, 0}).find("shorter than the 4-byte magic"),
      std::string::npos);
  EXPECT_NE(
      parse_error({0, 0, 8, 3, 0, 0}).find("truncated header"),
      std::string::npos);
  EXPECT_NE(
      parse_error(idx_bytes({2, 0}, {})).find("dimension 1 is 0"),
      std::string::npos);
  EXPECT_NE(
      parse_error(idx_bytes({65536, 65536, 65536, 65536}, {})).find("overflow"),
      std::string::npos);
}

TEST(Idx, TruncatedOrOverlongDataIsRejected) {
  EXPECT_NE(
      parse_error(idx_bytes({2, 4}, std::vector<std::uint8_t>(5)))
          .find("promises 8 bytes of data, the file has 5"),
      std::string::npos);
  EXPECT_NE(
      parse_error(idx_bytes({2, 4}, std::vector<std::uint8_t>(9)))
          .find("1 bytes after the 8"),
      std::string::npos);
}

TEST(Idx, ReadsGzipAndRawFilesAlike) {
  test::TempDir dir;
  const auto bytes =
      idx_bytes({3, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  test::write_bytes(dir.path() / "raw", bytes);
  test::write_gzip(dir.path() / "packed.gz", bytes);
  EXPECT_EQ(read_file_maybe_gzip((dir.path() / "raw").string()), bytes);
  EXPECT_EQ(read_file_maybe_gzip((dir.path() / "packed.gz").string()), bytes);
}

TEST(Idx, TruncatedGzipIsADataErrorNamingTheFile) {
  test::TempDir dir;
  std::vector<std::uint8_t> noise(200000);
  std::mt19937 rng(1);
  for (auto& b : noise) {
    b = static_cast<std::uint8_t>(rng());
  }
  const auto path = dir.path() / "cut.gz";
  test::write_gzip(path, idx_bytes({200000}, noise));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  try {
    read_file_maybe_gzip(path.string());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("gzip"), std::string::npos)
        << e.what();
  }
}

TEST(Idx, AGzipBombStopsAtTheLimit) {
  test::TempDir dir;
  test::write_gzip(
      dir.path() / "big.gz",
      std::vector<std::uint8_t>(1 << 20, 0)); // 1 MiB of zeros, ~1 KiB packed
  EXPECT_THROW(
      read_file_maybe_gzip((dir.path() / "big.gz").string(), 1 << 16),
      DataError);
}

TEST(Idx, MissingFileNamesIt) {
  try {
    read_file_maybe_gzip("/nonexistent/train-images-idx3-ubyte.gz");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("/nonexistent/train-images-idx3-ubyte.gz"),
        std::string::npos);
  }
}

} // namespace hotloop::data
