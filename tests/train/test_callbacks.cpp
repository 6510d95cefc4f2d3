// Callbacks: every event in the order callback.h promises, losses in step
// order whether read now or later, a callback's figures in summary.json, the
// trainer's log lines, a time budget that stops the run, and a run with no
// callbacks that writes no metrics or telemetry.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "hotloop/train/callbacks/time_budget.h"
#include "hotloop/train/trainer.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

using test::make;
using test::synthetic;

// Writes down every event as a short word ("step_end 3", "phase forward").
class Recorder final : public Callback {
 public:
  std::vector<std::string> events;
  std::vector<std::int64_t> loss_steps;
  std::string name() const override {
    return "recorder";
  }
  void on_fit_start(const RunState& s) override {
    events.push_back(fmt::format("fit_start {}", s.total_steps));
  }
  void on_step_begin(const RunState& s) override {
    events.push_back(fmt::format("step_begin {}", s.step + 1));
  }
  void on_phase(const RunState&, Phase p) override {
    events.push_back(fmt::format("phase {}", to_string(p)));
  }
  void on_gradients(const RunState& s) override {
    events.push_back(fmt::format("gradients {}", s.step + 1));
  }
  void on_step_end(const RunState& s, const StepEnd& e) override {
    events.push_back(fmt::format("step_end {}", s.step));
    EXPECT_GT(e.seconds, 0);
    EXPECT_EQ(e.samples, 32);
  }
  void on_loss(const RunState&, const StepLoss& l) override {
    events.push_back(fmt::format("loss {}", l.step));
    loss_steps.push_back(l.step);
  }
  void on_evaluation(const RunState& s, const EvalResult&) override {
    events.push_back(fmt::format("evaluation {}", s.step));
  }
  void on_checkpoint(const RunState& s, const std::string&) override {
    events.push_back(fmt::format("checkpoint {}", s.step));
  }
  void on_oom_recovery(const RunState&, const OomRecoveryEvent& e) override {
    events.push_back(fmt::format("oom_recovery {}", e.micro_batch));
  }
  void on_message(const RunState&, const std::string& line) override {
    messages.push_back(line);
  }
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary&) override {
    events.push_back("fit_end");
    return {{"steps_seen", s.step}};
  }
  std::vector<std::string> messages;
};

TrainerOptions options(const std::filesystem::path& out) {
  TrainerOptions o;
  o.model.name = "mlp";
  o.model.image.in_channels = 1;
  o.model.image.size = 8;
  o.model.image.num_classes = 10;
  o.batch = 32;
  o.steps = 4;
  o.device = "cpu";
  o.threads = 1;
  o.seed = 2;
  o.out_dir = out.string();
  o.checkpoint_every = 2;
  o.loader.workers = 1;
  o.loader.augment = data::Augment::None;
  return o;
}

std::size_t index_of(const std::vector<std::string>& v, const std::string& e) {
  return static_cast<std::size_t>(std::find(v.begin(), v.end(), e) - v.begin());
}

} // namespace

TEST(Callbacks, HearEveryEventInTheOrderTheLoopRunsThem) {
  test::TempDir dir;
  const TrainerOptions o = options(dir.path() / "run");
  auto rec = std::make_shared<Recorder>();
  const TrainSummary s = Trainer(
                             make(o),
                             synthetic("synthetic:256x1x8x8"),
                             synthetic("synthetic:64x1x8x8", data::Split::Val),
                             o,
                             {{rec}, nullptr})
                             .fit();
  const auto& e = rec->events;
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front(), "fit_start 4");
  EXPECT_EQ(e.back(), "fit_end");
  // One step, as it runs on the CPU: data, forward, backward, optimizer,
  // the final gradients, its end, then its loss (read at once here).
  const std::size_t begin = index_of(e, "step_begin 2");
  const std::vector<std::string> step2(
      e.begin() + static_cast<std::ptrdiff_t>(begin),
      e.begin() + static_cast<std::ptrdiff_t>(begin) + 8);
  EXPECT_EQ(
      step2,
      (std::vector<std::string>{
          "step_begin 2",
          "phase data",
          "phase forward",
          "phase backward",
          "phase optimizer",
          "gradients 2",
          "step_end 2",
          "loss 2"}));
  // Checkpoints at 2 and 4; the evaluation at the end comes before the last
  // checkpoint (which keeps its result).
  EXPECT_LT(index_of(e, "loss 2"), index_of(e, "checkpoint 2"));
  EXPECT_LT(index_of(e, "evaluation 4"), index_of(e, "checkpoint 4"));
  EXPECT_LT(index_of(e, "checkpoint 4"), index_of(e, "fit_end"));
  EXPECT_EQ(rec->loss_steps, (std::vector<std::int64_t>{1, 2, 3, 4}));
  // What it returned at the end is in the summary, under its name.
  EXPECT_EQ(s.callbacks["recorder"]["steps_seen"], 4);
  std::ifstream in(dir.path() / "run" / "summary.json");
  EXPECT_EQ(nlohmann::json::parse(in)["recorder"]["steps_seen"], 4);
  // The trainer's log lines reach it.
  EXPECT_TRUE(std::any_of(
      rec->messages.begin(), rec->messages.end(), [](const std::string& m) {
        return m.starts_with("train: mlp on cpu");
      }));
}

TEST(Callbacks, LossesReadBackLaterStillComeInStepOrderAfterTheirStepsEnd) {
  test::TempDir dir;
  TrainerOptions o = options(dir.path() / "run");
  o.steps = 11;
  o.readback_every = 4; // on the CPU too: the device-side path
  o.checkpoint_every = 100; // a checkpoint would read everything back
  auto rec = std::make_shared<Recorder>();
  Trainer(
      make(o), synthetic("synthetic:512x1x8x8"), nullptr, o, {{rec}, nullptr})
      .fit();
  std::vector<std::int64_t> want(11);
  std::iota(want.begin(), want.end(), 1);
  EXPECT_EQ(rec->loss_steps, want);
  for (std::int64_t step = 1; step <= 11; ++step) {
    EXPECT_LT(
        index_of(rec->events, fmt::format("step_end {}", step)),
        index_of(rec->events, fmt::format("loss {}", step)))
        << step;
  }
  // Deferred: step 1's loss arrives after step 4 has ended, not before.
  EXPECT_GT(
      index_of(rec->events, "loss 1"), index_of(rec->events, "step_end 4"));
}

TEST(Callbacks, AnOomRecoveryIsAnEvent) {
  test::TempDir dir;
  const TrainerOptions o = options(dir.path() / "run");
  auto rec = std::make_shared<Recorder>();
  test::ScopedEnv inject("HOTLOOP_INJECT_OOM_ABOVE", "16");
  Trainer(
      make(o), synthetic("synthetic:256x1x8x8"), nullptr, o, {{rec}, nullptr})
      .fit();
  EXPECT_EQ(
      std::count(rec->events.begin(), rec->events.end(), "oom_recovery 16"), 1);
}

TEST(Callbacks, ATimeBudgetStopsTheRunAfterAStepAsSigtermWould) {
  test::TempDir dir;
  TrainerOptions o = options(dir.path() / "run");
  o.steps = 50;
  std::atomic<bool> stop{false};
  const TrainSummary s =
      Trainer(
          make(o),
          synthetic("synthetic:256x1x8x8"),
          nullptr,
          o,
          {{std::make_shared<TimeBudget>(0.0, stop)}, nullptr})
          .fit(&stop);
  EXPECT_TRUE(s.stopped_early);
  // Raised as step 1 ends; the ranks agree on a stop inside a step, so step
  // 2 runs, sees it, and is the last.
  EXPECT_EQ(s.steps, 2);
  EXPECT_FALSE(s.last_checkpoint.empty());
}

TEST(Callbacks, WithoutCallbacksARunWritesNoMetricsOrTelemetry) {
  test::TempDir dir;
  const TrainerOptions o = options(dir.path() / "run");
  Trainer(make(o), synthetic("synthetic:256x1x8x8"), nullptr, o, {{}, nullptr})
      .fit();
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "run" / "metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "run" / "telemetry.jsonl"));
  std::ifstream in(dir.path() / "run" / "config.json");
  EXPECT_TRUE(nlohmann::json::parse(in)["callbacks"].empty());
  // The default list writes both.
  const TrainerOptions d = options(dir.path() / "default");
  Trainer(make(d), synthetic("synthetic:256x1x8x8"), nullptr, d).fit();
  EXPECT_TRUE(
      std::filesystem::exists(dir.path() / "default" / "metrics.jsonl"));
  EXPECT_TRUE(
      std::filesystem::exists(dir.path() / "default" / "telemetry.jsonl"));
}

} // namespace hotloop::train
