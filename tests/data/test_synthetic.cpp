#include <gtest/gtest.h>

#include <ATen/ops/equal.h>

#include "hotloop/data/sources/synthetic.h"
#include "hotloop/errors.h"

namespace hotloop::data {

TEST(Synthetic, ItemsAreAFunctionOfSeedAndIndex) {
  SyntheticOptions o;
  o.count = 100;
  o.shape = {3, 17, 9}; // odd sizes: the last bytes are filled too
  o.seed = 7;
  const Synthetic a(o);
  const Synthetic b(o);
  EXPECT_TRUE(at::equal(a.get(5).image, b.get(5).image));
  EXPECT_EQ(a.get(5).label, b.get(5).label);
  EXPECT_FALSE(at::equal(a.get(5).image, a.get(6).image));
  o.seed = 8;
  EXPECT_FALSE(at::equal(a.get(5).image, Synthetic(o).get(5).image));
}

TEST(Synthetic, ShapeLabelsAndClasses) {
  SyntheticOptions o;
  o.count = 1000;
  o.shape = {1, 8, 8};
  o.num_classes = 4;
  const Synthetic ds(o);
  EXPECT_EQ(ds.size(), 1000u);
  EXPECT_EQ(ds.num_classes(), 4u);
  EXPECT_EQ(*ds.shape(), (ImageShape{1, 8, 8}));
  std::vector<int> seen(4, 0);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const Sample s = ds.get(i);
    ASSERT_GE(s.label, 0);
    ASSERT_LT(s.label, 4);
    ++seen[s.label];
  }
  for (int n : seen) {
    EXPECT_GT(n, 150) << "labels should be spread over the classes";
  }
  EXPECT_EQ(ds.get(0).image.sizes(), (std::vector<std::int64_t>{1, 8, 8}));
}

TEST(Synthetic, ZeroCountOrShapeIsAUsageError) {
  SyntheticOptions o;
  EXPECT_THROW(Synthetic{o}, UsageError);
  o.count = 10;
  o.shape = {3, 0, 4};
  EXPECT_THROW(Synthetic{o}, UsageError);
}

} // namespace hotloop::data
