// fp16 dynamic loss scaling, on the CPU (ATen's AMP kernels run there too).
#include <gtest/gtest.h>

#include <limits>

#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>

#include "hotloop/train/loss_scaler.h"

namespace hotloop::train {
namespace {

at::Tensor param_with_grad(float g) {
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  p.mutable_grad() = at::full({3}, g);
  return p;
}

} // namespace

TEST(LossScaler, UnscalesGradientsAndGrowsAfterTheInterval) {
  LossScalerOptions o;
  o.init_scale = 8;
  o.growth_interval = 2;
  LossScaler s(o, c10::Device(c10::kCPU));
  EXPECT_FLOAT_EQ(s.scale(at::ones({})).item<float>(), 8.0f);
  at::Tensor p = param_with_grad(16);
  EXPECT_FALSE(s.unscale({p}));
  EXPECT_FLOAT_EQ(p.grad()[0].item<float>(), 2.0f);
  EXPECT_FALSE(s.update(false));
  EXPECT_DOUBLE_EQ(s.current_scale(), 8.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_DOUBLE_EQ(s.current_scale(), 16.0); // two good steps: doubled
}

TEST(LossScaler, ANonFiniteGradientSkipsTheStepAndBacksOff) {
  LossScalerOptions o;
  o.init_scale = 1024;
  LossScaler s(o, c10::Device(c10::kCPU));
  at::Tensor good = param_with_grad(1);
  at::Tensor bad = param_with_grad(std::numeric_limits<float>::infinity());
  const bool found = s.unscale({good, bad});
  EXPECT_TRUE(found);
  EXPECT_TRUE(s.update(found));
  EXPECT_DOUBLE_EQ(s.current_scale(), 512.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(
      first_non_finite_gradient({{"good", good}, {"layer.bad", bad}}),
      "layer.bad");
}

TEST(LossScaler, CollapsesBelowTheFloorOrAfterTooManySkipsInARow) {
  LossScalerOptions o;
  o.init_scale = 4;
  o.min_scale = 0.5;
  o.max_consecutive_skips = 100;
  LossScaler s(o, c10::Device(c10::kCPU));
  for (int i = 0; i < 3; ++i) {
    s.update(true);
  }
  EXPECT_FALSE(s.collapsed()); // 4 -> 0.5: at the floor, not below
  s.update(true);
  EXPECT_TRUE(s.collapsed()); // 0.25
  o.init_scale = 65536;
  o.max_consecutive_skips = 3;
  LossScaler t(o, c10::Device(c10::kCPU));
  t.update(true);
  t.update(true);
  EXPECT_FALSE(t.collapsed());
  t.update(true);
  EXPECT_TRUE(t.collapsed());
}

TEST(LossScaler, StateRoundTrips) {
  LossScaler s({}, c10::Device(c10::kCPU));
  s.update(true);
  LossScaler t({}, c10::Device(c10::kCPU));
  t.load_state(s.state());
  EXPECT_DOUBLE_EQ(t.current_scale(), s.current_scale());
  EXPECT_EQ(t.skipped_steps(), 1);
}

// The state holds how many good steps have passed toward growth: a scaler
// restored from it grows on the same step as the one that kept running, on
// the host (the scale it reports) and on the device (the scale it applies).
TEST(LossScaler, ARestoredScalerGrowsOnTheSameStepAsTheOneThatKeptRunning) {
  LossScalerOptions o;
  o.init_scale = 8;
  o.growth_interval = 3;
  LossScaler s(o, c10::Device(c10::kCPU));
  s.update(false);
  s.update(false); // one good step short of growing
  LossScaler restored(o, c10::Device(c10::kCPU));
  restored.load_state(s.state());
  s.update(false);
  restored.update(false);
  EXPECT_DOUBLE_EQ(s.current_scale(), 16.0);
  EXPECT_DOUBLE_EQ(restored.current_scale(), 16.0) << "the host's tracker";
  EXPECT_FLOAT_EQ(restored.scale(at::ones({})).item<float>(), 16.0f)
      << "the device's tracker";
}

// The scale is read every step (the collapse check, the step's record) from
// the host's own copy of the update: no device read. It must stay exactly
// the device's, through backoffs, growth and a resume.
TEST(LossScaler, TheHostsScaleIsTheDevicesAfterEveryUpdate) {
  LossScalerOptions o;
  o.init_scale = 3; // not a power of two: float rounding shows
  o.growth_factor = 1.7;
  o.backoff_factor = 0.3;
  o.growth_interval = 3;
  o.min_scale = 0;
  o.max_consecutive_skips = 1000;
  LossScaler s(o, c10::Device(c10::kCPU));
  const bool pattern[] = {
      false,
      false,
      false,
      true,
      false,
      false,
      false,
      false,
      true,
      true,
      false,
      false,
      false,
      false};
  for (int round = 0; round < 3; ++round) {
    for (const bool inf : pattern) {
      s.update(inf);
      const double device = s.state()[0].second.item<float>();
      ASSERT_EQ(s.current_scale(), device) << "round " << round;
    }
  }
  LossScaler resumed(o, c10::Device(c10::kCPU));
  resumed.load_state(s.state());
  EXPECT_EQ(resumed.current_scale(), s.current_scale());
  for (int i = 0; i < 4; ++i) {
    resumed.update(false);
    s.update(false);
  }
  EXPECT_EQ(resumed.current_scale(), s.current_scale());
  EXPECT_EQ(resumed.current_scale(), resumed.state()[0].second.item<float>());
}

} // namespace hotloop::train
