#include <gtest/gtest.h>

#include "hotloop/core/units.h"

namespace hotloop {

TEST(FormatBytes, PicksTheLargestUnitBelow1024) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3ULL << 30), "3.0 GiB");
  EXPECT_EQ(format_bytes(150754820096ULL), "140.4 GiB");
}

} // namespace hotloop
