#include <gtest/gtest.h>

#include "hotloop/errors.h"
#include "hotloop/train/schedule.h"

namespace hotloop::train {

TEST(Schedule, CosineWithWarmupRisesLinearlyThenFallsToTheFloor) {
  ScheduleOptions o;
  o.kind = ScheduleKind::Cosine;
  o.lr = 1.0;
  o.warmup_steps = 4;
  o.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(o, 0, 14), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate(o, 3, 14), 1.0);
  EXPECT_DOUBLE_EQ(
      learning_rate(o, 4, 14), 1.0); // first step after warmup: the peak
  EXPECT_NEAR(learning_rate(o, 13, 14), 0.1, 1e-12); // last step: the floor
  EXPECT_NEAR(
      learning_rate(o, 8, 14) + learning_rate(o, 9, 14),
      1.1,
      1e-9); // symmetric about the middle
}

TEST(Schedule, StepMultipliesByGammaEveryStepSize) {
  ScheduleOptions o;
  o.kind = ScheduleKind::Step;
  o.lr = 1.0;
  o.step_size = 10;
  o.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(o, 9, 100), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(o, 25, 100), 0.25);
}

// torch.optim.lr_scheduler.OneCycleLR(max_lr=1, total_steps=100) as PyTorch
// 2.11 computes it: 0.04 at step 0, 0.9312914445604428 at step 24, the peak
// at step 29, 4e-6 at step 99.
TEST(Schedule, OneCycleMatchesTorchsOneCycleLR) {
  ScheduleOptions o;
  o.kind = ScheduleKind::OneCycle;
  o.lr = 1.0;
  EXPECT_NEAR(learning_rate(o, 0, 100), 0.04, 1e-12);
  EXPECT_NEAR(learning_rate(o, 24, 100), 0.9312914445604428, 1e-12);
  EXPECT_NEAR(learning_rate(o, 29, 100), 1.0, 1e-12);
  EXPECT_NEAR(learning_rate(o, 99, 100), 4e-6, 1e-12);
  EXPECT_LT(learning_rate(o, 60, 100), learning_rate(o, 40, 100));
}

TEST(Schedule, UnknownNamesAreUsageErrors) {
  EXPECT_EQ(parse_schedule("onecycle"), ScheduleKind::OneCycle);
  EXPECT_THROW(parse_schedule("linear"), UsageError);
}

} // namespace hotloop::train
