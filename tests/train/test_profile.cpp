// --profile: LibTorch's profiler over chosen steps. The trace of steps 3-4 of
// a CPU run is valid Chrome-trace JSON with those steps' ranges, their
// forward/backward/optimizer phases and the operators inside them, and none
// of the other steps; a run without --profile never turns the profiler on;
// "auto" records the steps after a slow one; a bad range is bad usage.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "hotloop/errors.h"
#include "hotloop/telemetry/profiler.h"
#include "hotloop/train/callbacks/profile_callback.h"
#include "hotloop/train/run_state.h"
#include "hotloop/train/standard_callbacks.h"
#include "hotloop/train/trainer.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

namespace fs = std::filesystem;

// Notes whether the profiler was on as each step ended.
class ProfilerProbe final : public Callback {
 public:
  std::vector<bool> on;
  std::string name() const override {
    return "probe";
  }
  void on_step_end(const RunState&, const StepEnd&) override {
    on.push_back(telemetry::profiler_on());
  }
};

std::set<std::string> event_names(const fs::path& trace) {
  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in); // throws if invalid
  std::set<std::string> names;
  for (const auto& e : j.at("traceEvents")) {
    if (e.contains("name")) {
      names.insert(e["name"].get<std::string>());
    }
  }
  return names;
}

TEST(Profile, StepsThreeToFourAreRecordedWithTheirPhasesAndOperators) {
  test::TempDir dir;
  TrainerOptions o = test::small_options((dir.path() / "run").string());
  o.steps = 6;
  CallbackOptions c;
  c.console.enabled = false;
  c.profile.steps = "3-4";
  auto probe = std::make_shared<ProfilerProbe>();
  Callbacks callbacks = standard_callbacks(c);
  callbacks.push_back(probe);
  const TrainSummary s = Trainer(
                             test::make(o),
                             test::synthetic("synthetic:256x1x8x8"),
                             nullptr,
                             o,
                             {callbacks, nullptr})
                             .fit();
  EXPECT_EQ(
      probe->on, (std::vector<bool>{false, false, true, false, false, false}));
  EXPECT_FALSE(telemetry::profiler_on());
  const fs::path trace =
      dir.path() / "run" / "profile" / "steps-3-4.pt.trace.json";
  ASSERT_TRUE(fs::exists(trace));
  const std::set<std::string> names = event_names(trace);
  for (const char* want :
       {"hotloop::step 3",
        "hotloop::step 4",
        "hotloop::forward",
        "hotloop::backward",
        "hotloop::optimizer",
        "aten::addmm"}) {
    EXPECT_TRUE(names.contains(want)) << want;
  }
  EXPECT_FALSE(names.contains("hotloop::step 2"));
  EXPECT_FALSE(names.contains("hotloop::step 5"));
  bool backward_op = false;
  for (const auto& n : names) {
    backward_op = backward_op || n.find("AddmmBackward") != std::string::npos;
  }
  EXPECT_TRUE(backward_op);
  // summary.json names the trace.
  std::ifstream in(dir.path() / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  ASSERT_EQ(summary["profile"]["traces"].size(), 1u);
  EXPECT_EQ(summary["profile"]["traces"][0]["steps"], "3-4");
  EXPECT_EQ(summary["profile"]["traces"][0]["path"], trace.string());
  // Two steps of the mlp's forward (3 x its count is a training step's).
  EXPECT_GT(summary["profile"]["traces"][0]["matmul_flops"].get<double>(), 0);
}

TEST(Profile, ARunWithoutItNeverTurnsTheProfilerOn) {
  test::TempDir dir;
  TrainerOptions o = test::small_options((dir.path() / "run").string());
  o.steps = 4;
  CallbackOptions c;
  c.console.enabled = false;
  auto probe = std::make_shared<ProfilerProbe>();
  Callbacks callbacks = standard_callbacks(c);
  for (const auto& cb : callbacks) {
    EXPECT_NE(cb->name(), "profile");
  }
  callbacks.push_back(probe);
  Trainer(
      test::make(o),
      test::synthetic("synthetic:256x1x8x8"),
      nullptr,
      o,
      {callbacks, nullptr})
      .fit();
  EXPECT_EQ(probe->on, std::vector<bool>(4, false));
  EXPECT_FALSE(fs::exists(dir.path() / "run" / "profile"));
}

TEST(Profile, AutoRecordsTheStepsAfterASlowStep) {
  // The callback's own events, fed by hand: step 20 takes 10x the others.
  test::TempDir dir;
  ProfileOptions p;
  p.steps = "auto";
  p.auto_steps = 2;
  ProfileCallback cb(p, nullptr);
  RunState s;
  s.run_dir = dir.path().string();
  std::vector<std::string> log;
  s.log = [&](const std::string& line) { log.push_back(line); };
  cb.on_fit_start(s);
  std::vector<std::int64_t> recorded;
  for (std::int64_t step = 1; step <= 30; ++step) {
    cb.on_step_begin(s);
    if (telemetry::profiler_on()) {
      recorded.push_back(step);
    }
    s.step = step;
    StepEnd e;
    e.seconds = step == 20 ? 0.1 : 0.01;
    e.samples = 32;
    cb.on_step_end(s, e);
  }
  const nlohmann::json out = cb.on_fit_end(s, TrainSummary{});
  EXPECT_EQ(recorded, (std::vector<std::int64_t>{21, 22}));
  ASSERT_EQ(out["traces"].size(), 1u);
  EXPECT_EQ(out["traces"][0]["steps"], "21-22");
  EXPECT_NE(
      out["traces"][0]["reason"].get<std::string>().find(
          "step 20 took 100.0 ms"),
      std::string::npos)
      << out;
  EXPECT_TRUE(fs::exists(dir.path() / "profile" / "steps-21-22.pt.trace.json"));
}

TEST(Profile, AMalformedRangeIsBadUsage) {
  for (const char* bad : {"5-2", "x", "0", "3-", "-4", "1-2-3"}) {
    ProfileOptions p;
    p.steps = bad;
    EXPECT_THROW(p.validate(), UsageError) << bad;
  }
}

} // namespace
} // namespace hotloop::train
