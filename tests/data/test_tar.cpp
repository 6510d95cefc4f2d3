#include <gtest/gtest.h>

#include <filesystem>

#include "hotloop/data/file_io.h"
#include "hotloop/data/sources/tar.h"
#include "hotloop/errors.h"
#include "support/temp_dir.h"

namespace hotloop::data {

namespace {

std::vector<std::uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

std::string error_of(const std::vector<std::uint8_t>& tar) {
  try {
    list_tar(tar, "shard.tar");
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(Tar, WriterAndReaderRoundTripNamesOffsetsAndData) {
  test::TempDir dir;
  const auto path = (dir.path() / "a.tar").string();
  const std::string long_name =
      "deep/" + std::string(120, 'd') + "/000001.jpg"; // needs the ustar prefix
  {
    TarWriter w(path);
    w.add("000000.jpg", bytes_of("JPEGDATA"));
    w.add("000000.cls", bytes_of("2"));
    w.add(long_name, bytes_of(std::string(1000, 'x')));
    w.add("empty.txt", {});
    w.close();
    EXPECT_EQ(w.bytes_written() % 512, 0u);
  }
  const auto members = list_tar_file(path);
  ASSERT_EQ(members.size(), 4u);
  EXPECT_EQ(members[0].name, "000000.jpg");
  EXPECT_EQ(members[0].size, 8u);
  EXPECT_EQ(
      read_file_range(path, members[0].offset, members[0].size),
      bytes_of("JPEGDATA"));
  EXPECT_EQ(read_file_range(path, members[1].offset, 1), bytes_of("2"));
  EXPECT_EQ(members[2].name, long_name);
  EXPECT_EQ(members[2].size, 1000u);
  EXPECT_EQ(members[3].size, 0u);
  EXPECT_EQ(
      list_tar(read_file(path), path).size(),
      4u); // the in-memory reader agrees
}

TEST(Tar, DamagedOrTruncatedShardsAreDataErrorsWithTheOffset) {
  test::TempDir dir;
  const auto path = (dir.path() / "a.tar").string();
  {
    TarWriter w(path);
    w.add("x.jpg", bytes_of(std::string(3000, 'x')));
    w.add("y.jpg", bytes_of("y"));
  }
  const auto good = read_file(path);
  auto bad_sum = good;
  bad_sum[0] = 'z'; // name changed, checksum not
  EXPECT_NE(error_of(bad_sum).find("checksum mismatch"), std::string::npos)
      << error_of(bad_sum);
  EXPECT_NE(error_of(bad_sum).find("byte 0"), std::string::npos);
  auto truncated = good;
  truncated.resize(2048);
  EXPECT_NE(error_of(truncated).find("runs past the end"), std::string::npos)
      << error_of(truncated);
  auto bad_size = good;
  bad_size[124] = '9'; // not octal
  EXPECT_FALSE(error_of(bad_size).empty());
  EXPECT_TRUE(list_tar(std::vector<std::uint8_t>(1024, 0), "empty.tar")
                  .empty()); // just the end blocks
}

TEST(Tar, MissingFileIsADataError) {
  EXPECT_THROW(list_tar_file("/nonexistent/shard.tar"), DataError);
}

} // namespace hotloop::data
