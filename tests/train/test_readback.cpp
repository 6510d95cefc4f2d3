// Per-step device values read back every N steps: nothing is lost, nothing
// is repeated, rows come back in step order with their values.
#include <gtest/gtest.h>

#include <ATen/ops/scalar_tensor.h>

#include "hotloop/errors.h"
#include "hotloop/train/readback.h"

namespace hotloop::train {

TEST(StepReadback, HandsBackEveryStepsValuesInOrderAfterEachFullBlock) {
  StepReadback r(3, 2);
  std::vector<StepReadback::Row> got;
  std::vector<std::size_t> sizes;
  for (std::int64_t step = 1; step <= 7; ++step) {
    r.record(
        step,
        {at::scalar_tensor(0.5 * static_cast<double>(step)),
         at::scalar_tensor(static_cast<double>(-step))});
    const auto rows = r.poll();
    sizes.push_back(rows.size());
    got.insert(got.end(), rows.begin(), rows.end());
  }
  // On the CPU a copy lands at once: 3 rows after steps 3 and 6.
  EXPECT_EQ(sizes, (std::vector<std::size_t>{0, 0, 3, 0, 0, 3, 0}));
  const auto rest = r.drain();
  got.insert(got.end(), rest.begin(), rest.end());
  ASSERT_EQ(got.size(), 7u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto step = static_cast<std::int64_t>(i + 1);
    EXPECT_EQ(got[i].step, step);
    ASSERT_EQ(got[i].values.size(), 2u);
    EXPECT_DOUBLE_EQ(got[i].values[0], 0.5 * static_cast<double>(step));
    EXPECT_DOUBLE_EQ(got[i].values[1], static_cast<double>(-step));
  }
  EXPECT_TRUE(r.drain().empty());
}

TEST(StepReadback, AWrongNumberOfValuesIsAnError) {
  StepReadback r(2, 2);
  EXPECT_THROW(r.record(1, {at::scalar_tensor(1.0)}), Error);
  EXPECT_THROW(StepReadback(0, 1), Error);
}

} // namespace hotloop::train
