#include <gtest/gtest.h>

#include "hotloop/core/units.h"
#include "hotloop/errors.h"

namespace hotloop {

TEST(FormatBytes, PicksTheLargestUnitBelow1024) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3ULL << 30), "3.0 GiB");
  EXPECT_EQ(format_bytes(150754820096ULL), "140.4 GiB");
}

} // namespace hotloop

namespace hotloop {

TEST(ParseBytes, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("256MiB", "--shard-size"), 256ULL << 20);
  EXPECT_EQ(parse_bytes("1gib", "x"), 1ULL << 30);
  EXPECT_EQ(parse_bytes("500MB", "x"), 500000000ULL);
  EXPECT_EQ(parse_bytes("4096", "x"), 4096ULL);
  EXPECT_EQ(parse_bytes("1.5KiB", "x"), 1536ULL);
  for (const char* bad : {"", "MiB", "-1MiB", "12parsecs", "0"}) {
    EXPECT_THROW(parse_bytes(bad, "--shard-size"), UsageError) << bad;
  }
}

} // namespace hotloop
