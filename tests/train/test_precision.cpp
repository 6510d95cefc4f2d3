// Precision modes through their one interface (precision.h), on the CPU:
// what each asks of a step, and what loss scaling adds over another mode.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <ATen/autocast_mode.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>

#include "hotloop/errors.h"
#include "hotloop/train/loss_scaler.h"
#include "hotloop/train/precision.h"

namespace hotloop::train {
namespace {

const c10::Device kCpu(c10::kCPU);

bool autocast_on() {
  return at::autocast::is_autocast_enabled(c10::kCPU);
}

// What predict and generate run a trained model in: the user's choice;
// fp32 on the CPU; on a GPU its training precision, else bf16 where the GPU
// has it (a language model's recipe), else fp32.
TEST(InferencePrecision, OnAGpuTheModelsTrainingPrecisionOnTheCpuFp32) {
  const auto bf16 = Precision::Bf16;
  const auto fp16 = Precision::Fp16;
  const auto fp32 = Precision::Fp32;
  auto p = [](std::optional<Precision> asked,
              std::optional<Precision> trained,
              std::optional<Precision> gpu) {
    const InferencePrecision r = inference_precision(asked, trained, gpu);
    return std::pair{r.precision, r.why};
  };
  EXPECT_EQ(
      p(std::nullopt, bf16, bf16), std::pair(bf16, std::string("trained in")));
  EXPECT_EQ(p(std::nullopt, fp32, bf16).first, fp32); // trained in fp32
  EXPECT_EQ(
      p(std::nullopt, std::nullopt, bf16),
      std::pair(bf16, std::string("the recipe")));
  EXPECT_EQ(p(std::nullopt, std::nullopt, fp16).first, fp32); // a V100: fp32
  EXPECT_EQ(p(std::nullopt, bf16, fp16).first, fp32); // no bf16 on a V100
  EXPECT_EQ(
      p(std::nullopt, bf16, std::nullopt),
      std::pair(fp32, std::string("the CPU")));
  EXPECT_EQ(p(fp32, bf16, bf16), std::pair(fp32, std::string("asked")));
  EXPECT_EQ(p(bf16, std::nullopt, std::nullopt).first, bf16); // bf16 on the CPU
  EXPECT_THROW(p(fp16, std::nullopt, std::nullopt), UsageError);
}

} // namespace

TEST(PrecisionMode, EachModeSaysHowAStepRuns) {
  struct Case {
    Precision p;
    LossScaling scaling;
    bool autocast;
    bool scaled;
  };
  const Case cases[] = {
      {Precision::Fp32, LossScaling::Auto, false, false},
      {Precision::Tf32, LossScaling::Auto, false, false},
      {Precision::Bf16, LossScaling::Auto, true, false},
      {Precision::Bf16, LossScaling::On, true, true},
      {Precision::Fp32, LossScaling::On, false, true},
  };
  for (const Case& c : cases) {
    const std::string name = std::string(to_string(c.p)) + "/" +
        (c.scaling == LossScaling::On ? "scaled" : "auto");
    const auto mode = make_precision(c.p, c.scaling, kCpu);
    EXPECT_EQ(mode->precision(), c.p) << name;
    {
      const AutocastScope scope = mode->autocast();
      EXPECT_EQ(autocast_on(), c.autocast) << name;
    }
    EXPECT_FALSE(autocast_on()) << name << ": the scope restores";
    const float scaled = mode->scale(at::ones({})).item<float>();
    EXPECT_EQ(scaled, c.scaled ? 65536.0f : 1.0f) << name;
    EXPECT_EQ(mode->skips_overflow(), c.scaled) << name;
    EXPECT_EQ(mode->capture_blocker().empty(), !c.scaled) << name;
    EXPECT_EQ(mode->state().empty(), !c.scaled) << name;
    EXPECT_EQ(mode->loss_scale(), c.scaled ? 65536.0 : 0.0) << name;
  }
  EXPECT_THROW(
      make_precision(Precision::Fp16, LossScaling::Auto, kCpu), UsageError);
}

TEST(PrecisionMode, LossScalingSkipsAnOverflowingStepAndBacksOff) {
  const auto mode = make_precision(Precision::Bf16, LossScaling::On, kCpu);
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  p.mutable_grad() = at::full({3}, 65536.0f * 2);
  EXPECT_FALSE(mode->unscale_and_check({{"w", p}}, {p}, 1));
  EXPECT_FLOAT_EQ(p.grad()[0].item<float>(), 2.0f) << "unscaled in place";
  p.mutable_grad() = at::full({3}, std::numeric_limits<float>::infinity());
  EXPECT_TRUE(mode->unscale_and_check({{"w", p}}, {p}, 2));
  EXPECT_EQ(mode->skipped_steps(), 1);
  EXPECT_EQ(mode->loss_scale(), 32768.0);

  const auto resumed = make_precision(Precision::Bf16, LossScaling::On, kCpu);
  resumed->load_state(mode->state());
  EXPECT_EQ(resumed->loss_scale(), 32768.0);
  EXPECT_EQ(resumed->skipped_steps(), 1);
}

TEST(PrecisionMode, UnscaledModesNeverSkipAndIgnoreAScalersCheckpointState) {
  const auto scaled = make_precision(Precision::Fp32, LossScaling::On, kCpu);
  const auto plain = make_precision(Precision::Fp32, LossScaling::Off, kCpu);
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  p.mutable_grad() = at::full({3}, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(plain->unscale_and_check({{"w", p}}, {p}, 1));
  EXPECT_NO_THROW(plain->load_state(scaled->state()));
  EXPECT_EQ(plain->skipped_steps(), 0);
}

} // namespace hotloop::train
