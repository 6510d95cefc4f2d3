// Out of memory in a training step, raised as the real c10::OutOfMemoryError
// by the HOTLOOP_INJECT_OOM_ABOVE hook: the step is redone with half the
// micro-batch and twice the accumulation, so the run ends exactly where a run
// started at the smaller micro-batch ends; at micro-batch 1 it stops with a
// diagnosis; the memory report is written either way.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <ATen/ops/allclose.h>
#include <torch/utils.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/errors.h"
#include "hotloop/model/weights.h"
#include "hotloop/train/fault_injection.h"
#include "hotloop/train/oom_recovery.h"
#include "hotloop/train/trainer.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

using test::make;
using test::synthetic;

// cnn-small: BatchNorm statistics and dropout's generator are what a failed
// step attempt changes; augmentation draws per-sample seeds.
TrainerOptions cnn_options(const std::string& out) {
  TrainerOptions o;
  o.model.name = "cnn-small";
  o.model.image.in_channels = 1;
  o.model.image.size = 28;
  o.model.image.num_classes = 10;
  o.batch = 64;
  o.steps = 6;
  o.device = "cpu";
  o.threads = 1;
  o.seed = 11;
  o.out_dir = out;
  o.optimizer.kind = OptimizerKind::AdamW;
  o.schedule.kind = ScheduleKind::Cosine;
  o.schedule.lr = 2e-3;
  o.loader.workers = 1;
  o.loader.resident = data::Resident::Off;
  return o;
}

std::vector<nlohmann::json> read_lines(const std::filesystem::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

} // namespace

TEST(OomRecovery, HalvesTheMicroBatchAndEndsWhereASmallMicroBatchRunEnds) {
  test::TempDir dir;
  const auto train = synthetic("synthetic:640x1x28x28");
  const auto val = synthetic("synthetic:128x1x28x28", data::Split::Val);

  TrainerOptions reference = cnn_options((dir.path() / "ref").string());
  reference.micro_batch = 16;
  const TrainSummary want =
      Trainer(make(reference), train, val, reference).fit();

  TrainerOptions o = cnn_options((dir.path() / "oom").string());
  TrainSummary got;
  {
    test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "20");
    got = Trainer(make(o), train, val, o).fit();
  }
  EXPECT_EQ(got.oom_recoveries, 2); // 64 -> 32 -> 16
  EXPECT_EQ(got.micro_batch, 16);
  EXPECT_EQ(got.accum_steps, 4);
  EXPECT_EQ(got.steps, 6);
  ASSERT_TRUE(got.eval && want.eval);
  // Same samples, same order, same state: equal within float noise.
  EXPECT_NEAR(got.eval->loss, want.eval->loss, 1e-5 * want.eval->loss);
  EXPECT_NEAR(got.train_loss, want.train_loss, 1e-5 * want.train_loss);

  const auto summary =
      nlohmann::json::parse(std::ifstream(dir.path() / "oom" / "summary.json"));
  EXPECT_EQ(summary["oom_recoveries"], 2);
  EXPECT_EQ(summary["micro_batch"], 16);
  EXPECT_EQ(summary["accum_steps"], 4);

  const auto reports = read_lines(dir.path() / "oom" / "oom_report.jsonl");
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0]["step"], 1);
  EXPECT_EQ(reports[0]["micro_batch"], 64);
  EXPECT_EQ(reports[0]["action"]["micro_batch"], 32);
  EXPECT_EQ(reports[1]["action"]["accum_steps"], 4);
  EXPECT_EQ(reports[0]["device"], "cpu");
  EXPECT_GT(reports[0]["process_rss_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_NE(
      reports[0]["error"].get<std::string>().find("HOTLOOP_INJECT_OOM_ABOVE"),
      std::string::npos);

  int events = 0;
  for (const auto& line : read_lines(dir.path() / "oom" / "metrics.jsonl")) {
    events += line.value("event", "") == "oom_recovery" ? 1 : 0;
  }
  EXPECT_EQ(events, 2);
}

TEST(OomRecovery, AtMicroBatchOneStopsWithADiagnosisAndTheReport) {
  test::TempDir dir;
  const auto train = synthetic("synthetic:256x1x28x28");
  TrainerOptions o = cnn_options(dir.path().string());
  o.batch = 8;
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "0");
  try {
    Trainer(make(o), train, nullptr, o).fit();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(
        what.find("step 1: out of memory at micro-batch 1"), std::string::npos)
        << what;
    EXPECT_NE(what.find("oom_report.jsonl"), std::string::npos) << what;
    EXPECT_NE(e.hint().find("--precision bf16"), std::string::npos);
    EXPECT_NE(
        e.hint().find("--activation-checkpointing stages"), std::string::npos);
    EXPECT_NE(e.hint().find("--size"), std::string::npos);
  }
  const auto reports = read_lines(dir.path() / "oom_report.jsonl");
  ASSERT_EQ(reports.size(), 4u); // 8, 4, 2, 1
  EXPECT_EQ(reports.back()["micro_batch"], 1);
  EXPECT_EQ(reports.back()["action"], "stop");
}

TEST(OomRecovery, OffStopsAtTheFirstOutOfMemorySayingHowToTurnItOn) {
  test::TempDir dir;
  const auto train = synthetic("synthetic:256x1x28x28");
  TrainerOptions o = cnn_options(dir.path().string());
  o.oom_recovery = false;
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "20");
  try {
    Trainer(make(o), train, nullptr, o).fit();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(
        std::string(e.what()).find("micro-batch 64 with OOM recovery off"),
        std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("--oom-recovery true"), std::string::npos);
  }
  EXPECT_EQ(read_lines(dir.path() / "oom_report.jsonl").size(), 1u);
}

TEST(OomRecovery, ResumingWithAnotherMicroBatchContinuesAtTheSameSample) {
  // mlp has no BatchNorm or dropout: the micro-batch does not change the
  // math, so a run checkpointed at micro-batch 16 and resumed at 64 must end
  // where the uninterrupted run ends. A position kept in batches instead of
  // samples would skip three quarters of the epoch.
  test::TempDir dir;
  const auto train = synthetic("synthetic:512x1x8x8");
  TrainerOptions o;
  o.model.name = "mlp";
  o.model.image.in_channels = 1;
  o.model.image.size = 8;
  o.model.image.num_classes = 10;
  o.batch = 64;
  o.micro_batch = 16;
  o.steps = 6;
  o.device = "cpu";
  o.threads = 1;
  o.seed = 3;
  o.schedule.kind = ScheduleKind::Constant;
  o.schedule.lr = 0.05;
  o.loader.workers = 1;
  o.loader.augment = data::Augment::None;
  o.loader.resident = data::Resident::Off;

  TrainerOptions full = o;
  full.out_dir = (dir.path() / "full").string();
  auto m1 = make(full);
  Trainer(m1, train, nullptr, full).fit();

  TrainerOptions split = o;
  split.out_dir = (dir.path() / "split").string();
  std::atomic<bool> stop{true}; // stops after the first step
  Trainer(make(split), train, nullptr, split).fit(&stop);
  split.micro_batch = 64;
  split.resume = "auto";
  auto m2 = make(split);
  const TrainSummary s = Trainer(m2, train, nullptr, split).fit();
  EXPECT_EQ(s.steps, 6);
  EXPECT_EQ(s.micro_batch, 64);
  const auto w1 = model::state_dict(*m1);
  const auto w2 = model::state_dict(*m2);
  for (std::size_t i = 0; i < w1.size(); ++i) {
    // 4 partial means vs one mean in float32: ~1e-7 relative.
    EXPECT_TRUE(at::allclose(w1[i].second, w2[i].second, 1e-5, 1e-6))
        << w1[i].first;
  }
}

TEST(OomRecovery, SmallerMicroBatchKeepsMicroTimesAccumulationEqualToTheBatch) {
  EXPECT_EQ(smaller_micro_batch(64, 64), 32);
  EXPECT_EQ(smaller_micro_batch(64, 2), 1);
  EXPECT_EQ(smaller_micro_batch(64, 1), 0);
  EXPECT_EQ(smaller_micro_batch(60, 15), 6); // 7 does not divide 60
  EXPECT_EQ(smaller_micro_batch(96, 3), 1);
  EXPECT_EQ(smaller_micro_batch(90, 45), 18);
}

TEST(FaultInjection, EachVariableParsesOrIsAUsageErrorNamingIt) {
  {
    test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "lots");
    EXPECT_THROW(read_fault_injection(), UsageError);
  }
  {
    test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", std::nullopt);
    EXPECT_FALSE(read_fault_injection().oom_above.has_value());
  }
  {
    test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "12");
    const FaultInjection f = read_fault_injection();
    EXPECT_EQ(f.oom_above, 12);
    EXPECT_NO_THROW(f.oom_if_above(12));
    EXPECT_THROW(f.oom_if_above(13), c10::OutOfMemoryError);
  }
  {
    test::ScopedEnv inject("HOTLOOP_INJECT_OVERFLOW_STEPS", "3,5");
    const FaultInjection f = read_fault_injection();
    EXPECT_TRUE(f.overflow_at(3));
    EXPECT_FALSE(f.overflow_at(4));
    EXPECT_TRUE(f.overflow_at(5));
  }
  for (const char* bad : {"3,", "0", "x", "3,,4"}) {
    test::ScopedEnv inject("HOTLOOP_INJECT_OVERFLOW_STEPS", bad);
    EXPECT_THROW(read_fault_injection(), UsageError) << bad;
  }
  {
    // In a unit instead of after backward: that unit's pass only.
    test::ScopedEnv above("HOTLOOP_INJECT_OOM_ABOVE", "2");
    test::ScopedEnv unit("HOTLOOP_INJECT_OOM_UNIT", "backward:1");
    const FaultInjection f = read_fault_injection();
    EXPECT_NO_THROW(f.oom_if_above(3));
    EXPECT_NO_THROW(f.oom_in_unit(1, /*backward=*/false, 3));
    EXPECT_NO_THROW(f.oom_in_unit(0, /*backward=*/true, 3));
    EXPECT_NO_THROW(f.oom_in_unit(1, /*backward=*/true, 2));
    EXPECT_THROW(f.oom_in_unit(1, /*backward=*/true, 3), c10::OutOfMemoryError);
  }
  for (const char* bad :
       {"backward", "sideways:1", "forward:x", "forward:-1"}) {
    test::ScopedEnv inject("HOTLOOP_INJECT_OOM_UNIT", bad);
    EXPECT_THROW(read_fault_injection(), UsageError) << bad;
  }
  for (const char* bad : {"step", "step:x", "final-checkpoint:3", "nowhere"}) {
    test::ScopedEnv inject("HOTLOOP_INJECT_KILL", bad);
    EXPECT_THROW(read_fault_injection(), UsageError) << bad;
  }
  test::ScopedEnv inject("HOTLOOP_INJECT_KILL", "checkpoint:4");
  const FaultInjection f = read_fault_injection();
  EXPECT_EQ(f.kill, KillPoint::Checkpoint);
  EXPECT_EQ(f.kill_step, 4);
  EXPECT_NO_THROW(f.kill_at(KillPoint::Checkpoint, 3)); // not step 4: alive
  EXPECT_NO_THROW(f.kill_at(KillPoint::Step, 4));
}

} // namespace hotloop::train
