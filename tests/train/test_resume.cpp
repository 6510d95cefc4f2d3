// Checkpoints and resume on small synthetic data: a run stopped twice
// resumes to exactly the uninterrupted result, a write that fails half-way
// keeps the earlier checkpoints, corrupt and missing files, another run's
// directory, and options that cannot be resumed exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/errors.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/checkpoint_file.h"
#include "hotloop/train/trainer.h"
#include "support/cli_process.h"
#include "support/file_size_limit.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

using test::make;
using test::small_options;
using test::synthetic;

// Raises the stop flag as step `at` begins, as SIGTERM would then: the run
// finishes that step, checkpoints and returns.
class StopAtStep : public Callback {
 public:
  StopAtStep(std::int64_t at, std::atomic<bool>* stop) : at_(at), stop_(stop) {}
  std::string name() const override {
    return "stop-at-step";
  }
  void on_step_begin(const RunState& s) override {
    if (s.step + 1 == at_) {
      *stop_ = true;
    }
  }

 private:
  std::int64_t at_;
  std::atomic<bool>* stop_;
};

} // namespace

TEST(Trainer, AStoppedRunResumesToExactlyTheUninterruptedResult) {
  test::TempDir dir;
  const auto train = synthetic("synthetic:320x1x8x8");
  const auto val = synthetic("synthetic:64x1x8x8", data::Split::Val);
  TrainerOptions o = small_options((dir.path() / "full").string());
  o.model.name =
      "cnn-small"; // BatchNorm and dropout: buffers and RNG must resume too
  o.epochs = 3;
  o.optimizer.kind = OptimizerKind::AdamW;
  o.schedule.kind = ScheduleKind::Cosine;
  o.schedule.lr = 1e-3;
  o.loader.augment = data::Augment::Default;
  const TrainSummary full = Trainer(make(o), train, val, o).fit();

  // The same run stopped twice: after its first step, and at step 13, in
  // the middle of the second epoch (a callback raises the flag, as SIGTERM
  // would); each time resumed from the newest checkpoint in a new Trainer.
  TrainerOptions split = o;
  split.out_dir = (dir.path() / "split").string();
  std::atomic<bool> stop{true};
  const TrainSummary first = Trainer(make(split), train, val, split).fit(&stop);
  EXPECT_TRUE(first.stopped_early);
  EXPECT_EQ(first.steps, 1);

  split.resume = "auto";
  stop = false;
  TrainerContext at_13;
  at_13.callbacks.push_back(std::make_shared<StopAtStep>(13, &stop));
  const TrainSummary second =
      Trainer(make(split), train, val, split, at_13).fit(&stop);
  ASSERT_TRUE(second.stopped_early);
  ASSERT_EQ(second.steps, 13); // 10 steps per epoch: 3 batches into epoch 2
  EXPECT_NE(
      list_checkpoints(split.out_dir + "/checkpoints")
          .front()
          .find("step-00000013"),
      std::string::npos);

  const TrainSummary resumed = Trainer(make(split), train, val, split).fit();
  ASSERT_TRUE(resumed.eval && full.eval);
  EXPECT_EQ(resumed.steps, full.steps);
  EXPECT_EQ(resumed.eval->loss, full.eval->loss);
  EXPECT_EQ(resumed.eval->accuracy, full.eval->accuracy);
  EXPECT_EQ(resumed.resumed_at, 13);
  // The metrics file has each step once, as if the run had never stopped.
  EXPECT_EQ(
      test::steps_with_a_loss(split.out_dir), test::steps_one_to(full.steps));
}

namespace {

// Each step's loss scale and learning rate, from metrics.jsonl.
std::map<std::int64_t, std::pair<double, double>> scales_and_rates(
    const std::string& run_dir) {
  std::ifstream in(std::filesystem::path(run_dir) / "metrics.jsonl");
  std::map<std::int64_t, std::pair<double, double>> steps;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss_scale")) {
      steps[j["step"].get<std::int64_t>()] = {
          j["loss_scale"].get<double>(), j["lr"].get<double>()};
    }
  }
  return steps;
}

} // namespace

// Loss scaling's state is the checkpoint's too. Two overflows (steps 2 and
// 3) halve the scale twice and are skipped steps, which the schedule does not
// count; the scale grows after 2000 good steps in a row
// (LossScalerOptions::growth_interval), at step 2003. A run stopped at step
// 1500 and resumed must grow it on the same step as the run that never
// stopped and keep counting the skipped steps, so both record the same scale
// and learning rate at every step.
TEST(Trainer, AResumedScaledRunHasTheUninterruptedRunsScaleAndRateAtEveryStep) {
  const test::ScopedEnv overflow("HOTLOOP_INJECT_OVERFLOW_STEPS", "2,3");
  test::TempDir dir;
  const auto train = synthetic("synthetic:64x1x8x8");
  TrainerOptions o = small_options((dir.path() / "full").string());
  o.batch = 8;
  o.steps = 2010;
  o.loss_scaling = LossScaling::On; // fp32 scales too: the CPU runs it
  o.schedule.kind = ScheduleKind::Cosine;
  o.checkpoint_every = o.steps; // and the stop's
  Trainer(make(o), train, nullptr, o).fit();
  const auto full = scales_and_rates(o.out_dir);
  ASSERT_EQ(full.size(), 2010u);
  ASSERT_LT(full.at(4).first, full.at(1).first) << "the overflows halved it";
  ASSERT_GT(full.at(2010).first, full.at(4).first) << "and it grew again";

  TrainerOptions split = o;
  split.out_dir = (dir.path() / "split").string();
  std::atomic<bool> stop{false};
  TrainerContext at_1500;
  at_1500.callbacks.push_back(std::make_shared<StopAtStep>(1500, &stop));
  const TrainSummary first =
      Trainer(make(split), train, nullptr, split, at_1500).fit(&stop);
  ASSERT_TRUE(first.stopped_early);
  ASSERT_EQ(first.steps, 1500);
  split.resume = "auto";
  Trainer(make(split), train, nullptr, split).fit();
  EXPECT_EQ(scales_and_rates(split.out_dir), full);
}

// The disk fills up while a checkpoint is written: the error names it, the
// earlier checkpoints keep their bytes (none is pruned for the failed one),
// no temporary file is left, and the newest still resumes.
TEST(Checkpoint, AWriteThatFailsHalfwayKeepsTheEarlierOnesAndNoTemporaryFile) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 4;
  o.checkpoint_every = 2;
  o.keep_checkpoints = 2;
  Trainer(make(o), synthetic("synthetic:128x1x8x8"), nullptr, o).fit();
  const std::string folder = o.out_dir + "/checkpoints";
  const auto before = list_checkpoints(folder);
  ASSERT_EQ(before.size(), 2u);
  std::vector<std::string> bytes;
  for (const auto& p : before) {
    bytes.push_back(test::slurp(p));
  }
  const Checkpoint c = load_checkpoint(before.front());
  {
    const test::FileSizeLimit full_disk(bytes.front().size() / 2);
    try {
      save_checkpoint(folder, 6, c, 2);
      FAIL() << "a checkpoint past the file size limit was written";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("step-00000006"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(list_checkpoints(folder), before);
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(test::slurp(before[i]), bytes[i]) << before[i];
  }
  EXPECT_EQ(test::count_entries(folder), 2u);
  o.resume = "auto";
  o.steps = 5;
  EXPECT_EQ(
      Trainer(make(o), synthetic("synthetic:128x1x8x8"), nullptr, o)
          .fit()
          .steps,
      5);
}

TEST(Trainer, ResumeAutoSkipsACorruptNewestCheckpoint) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 4;
  o.checkpoint_every = 2;
  Trainer(make(o), synthetic("synthetic:128x1x8x8"), nullptr, o).fit();
  const auto newest = list_checkpoints(o.out_dir + "/checkpoints").front();
  std::filesystem::resize_file(
      newest, std::filesystem::file_size(newest) - 10); // truncated
  o.steps = 6;
  o.resume = "auto";
  testing::internal::CaptureStdout();
  const TrainSummary s =
      Trainer(make(o), synthetic("synthetic:128x1x8x8"), nullptr, o).fit();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("warning: skipping"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_NE(out.find("at step 2"), std::string::npos) << out;
  EXPECT_EQ(s.steps, 6);
}

TEST(Trainer, AFreshRunRefusesADirectoryThatHoldsAnotherRunsCheckpoints) {
  test::TempDir dir;
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 2;
  const auto data = synthetic("synthetic:128x1x8x8");
  Trainer(make(o), data, nullptr, o).fit();
  try {
    Trainer(make(o), data, nullptr, o).fit();
    FAIL() << "a second fresh run wrote into the first run's directory";
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("already holds a run's checkpoints"),
        std::string::npos);
    EXPECT_NE(e.hint().find("--resume auto"), std::string::npos);
  }
  o.resume = "auto";
  o.steps = 3;
  EXPECT_EQ(Trainer(make(o), data, nullptr, o).fit().steps, 3);
}

TEST(Trainer, ResumingWithOptionsThatChangeWhatIsTrainedIsRefusedNamingThem) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:128x1x8x8");
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 4;
  o.checkpoint_every = 2;
  Trainer(make(o), data, nullptr, o).fit();
  TrainerOptions changed = o;
  changed.resume = "auto";
  changed.steps = 6;
  changed.batch = 16;
  changed.precision = Precision::Bf16;
  try {
    Trainer(make(changed), data, nullptr, changed).fit();
    FAIL() << "resumed under a different batch and precision";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot resume"), std::string::npos) << what;
    EXPECT_NE(what.find("step-00000004"), std::string::npos) << what;
    EXPECT_NE(
        what.find("batch: 32 in the checkpoint, 16 now"), std::string::npos)
        << what;
    EXPECT_NE(
        what.find(R"(precision: "fp32" in the checkpoint, "bf16" now)"),
        std::string::npos)
        << what;
    EXPECT_EQ(what.find("steps:"), std::string::npos) << what;
    EXPECT_NE(e.hint().find("--init"), std::string::npos) << e.hint();
  }
  changed = o;
  changed.resume = "auto";
  changed.model.name = "cnn-small";
  EXPECT_THROW(
      Trainer(make(changed), data, nullptr, changed).fit(), UsageError);
  changed = o;
  changed.resume = "auto";
  changed.seed = 6;
  EXPECT_THROW(
      Trainer(make(changed), data, nullptr, changed).fit(), UsageError);
  // What does not change the training may: a longer run, other threads,
  // workers, micro-batch and checkpoint cadence.
  changed = o;
  changed.resume = "auto";
  changed.steps = 6;
  changed.threads = 2;
  changed.loader.workers = 2;
  changed.micro_batch = 16;
  changed.checkpoint_every = 3;
  EXPECT_EQ(Trainer(make(changed), data, nullptr, changed).fit().steps, 6);
}

// A checkpoint whose config has the layout before the option table (no
// "options") is refused naming the version that wrote it, not compared key by
// key against defaults.
TEST(Trainer, ACheckpointInTheOldConfigLayoutIsRefusedNamingItsVersion) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:128x1x8x8");
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 2;
  o.checkpoint_every = 2;
  Trainer(make(o), data, nullptr, o).fit();
  const std::string path =
      (dir.path() / "run" / "checkpoints" / "step-00000002.safetensors")
          .string();
  Checkpoint c = load_checkpoint(path);
  c.meta["config"] = {{"batch", 32}, {"model", {{"name", "mlp"}}}};
  c.meta["hotloop"] = "0.0.9";
  save_checkpoint((dir.path() / "old").string(), 2, c, 1);
  TrainerOptions resumed = o;
  resumed.out_dir = (dir.path() / "resumed").string();
  resumed.resume = (dir.path() / "old" / "step-00000002.safetensors").string();
  resumed.steps = 4;
  try {
    Trainer(make(resumed), data, nullptr, resumed).fit();
    FAIL() << "resumed a checkpoint in the old layout";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("written by hotloop 0.0.9"), std::string::npos) << what;
    EXPECT_NE(what.find("older layout"), std::string::npos) << what;
  }
}

TEST(Trainer, ResumeFromAMissingOrCorruptFileStopsNamingTheFile) {
  test::TempDir dir;
  const auto data = synthetic("synthetic:128x1x8x8");
  TrainerOptions o = small_options((dir.path() / "run").string());
  o.steps = 2;
  Trainer(make(o), data, nullptr, o).fit();
  const std::string good = list_checkpoints(o.out_dir + "/checkpoints").front();
  o.steps = 4;
  o.resume = (dir.path() / "nowhere.safetensors").string();
  try {
    Trainer(make(o), data, nullptr, o).fit();
    FAIL() << "resumed from a file that does not exist";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("nowhere.safetensors"), std::string::npos)
        << e.what();
  }
  const auto corrupt = dir.path() / "corrupt.safetensors";
  std::filesystem::copy_file(good, corrupt);
  {
    // One byte of the tensor data flipped: the checksum catches it.
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  o.resume = corrupt.string();
  try {
    Trainer(make(o), data, nullptr, o).fit();
    FAIL() << "resumed from a corrupt file";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("corrupt.safetensors"), std::string::npos)
        << e.what();
  }
  // The good one still resumes.
  o.resume = good;
  EXPECT_EQ(Trainer(make(o), data, nullptr, o).fit().steps, 4);
}

} // namespace hotloop::train
