// --profile: LibTorch's profiler over chosen steps. The trace of steps 3-4 of
// a CPU run is valid Chrome-trace JSON with those steps' ranges, their
// forward/backward/optimizer phases and the operators inside them, and none
// of the other steps; a run without --profile never turns the profiler on;
// "auto" records the steps after a slow one or a turn of the diagnosis, at
// most once per period and up to a size cap; a bad range is bad usage.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "hotloop/errors.h"
#include "hotloop/telemetry/profiler.h"
#include "hotloop/train/callbacks/profile_callback.h"
#include "hotloop/train/callbacks/standard_callbacks.h"
#include "hotloop/train/run_state.h"
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

// Feeds a ProfileCallback in "auto" mode 100 steps of 10 ms by hand (one of
// `slow_step` takes 100 ms) and the verdicts of the windows that close at the
// steps in `verdicts`; returns the steps recorded and on_fit_end's output.
struct AutoRun {
  std::vector<std::int64_t> recorded;
  nlohmann::json out;
};
AutoRun run_auto(
    const fs::path& dir,
    ProfileOptions p,
    std::int64_t slow_step,
    const std::map<std::int64_t, std::string>& verdicts) {
  p.steps = "auto";
  p.auto_steps = 2;
  std::int64_t step = 0;
  ProfileCallback cb(p, [&]() -> std::optional<std::string> {
    const auto it = verdicts.find(step);
    return it == verdicts.end() ? std::nullopt
                                : std::optional<std::string>(it->second);
  });
  RunState s;
  s.run_dir = dir.string();
  s.log = [](const std::string&) {};
  cb.on_fit_start(s);
  AutoRun r;
  for (step = 1; step <= 100; ++step) {
    cb.on_step_begin(s);
    if (telemetry::profiler_on()) {
      r.recorded.push_back(step);
    }
    s.step = step;
    StepEnd e;
    e.seconds = step == slow_step ? 0.1 : 0.01;
    e.samples = 32;
    cb.on_step_end(s, e);
  }
  r.out = cb.on_fit_end(s, TrainSummary{});
  return r;
}

TEST(Profile, AutoRecordsTheStepsAfterASlowStep) {
  test::TempDir dir;
  const AutoRun r = run_auto(dir.path(), ProfileOptions{}, 20, {});
  EXPECT_EQ(r.recorded, (std::vector<std::int64_t>{21, 22}));
  ASSERT_EQ(r.out["traces"].size(), 1u);
  EXPECT_EQ(r.out["traces"][0]["steps"], "21-22");
  EXPECT_NE(
      r.out["traces"][0]["reason"].get<std::string>().find(
          "step 20 took 100.0 ms"),
      std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(dir.path() / "profile" / "steps-21-22.pt.trace.json"));
}

TEST(Profile, AutoRecordsWhenTheDiagnosisTurnsAtMostOncePerPeriod) {
  // 10 ms steps: a window every 0.1 s of run time; the period is 0.3 s. The
  // turn at step 20 is recorded; the one at step 40 comes 0.2 s later, inside
  // the period, and is not; a verdict that stays unhealthy (step 60, due by
  // then) starts nothing; the turn at step 80 (0.6 s later) is recorded.
  test::TempDir dir;
  ProfileOptions p;
  p.auto_every_s = 0.3;
  const AutoRun r = run_auto(
      dir.path(),
      p,
      0,
      {{10, "healthy"},
       {20, "input-bound"},
       {30, "healthy"},
       {40, "throttled-thermal"},
       {60, "throttled-thermal"},
       {70, "healthy"},
       {80, "under-used"}});
  EXPECT_EQ(r.recorded, (std::vector<std::int64_t>{21, 22, 81, 82})) << r.out;
  ASSERT_EQ(r.out["traces"].size(), 2u);
  EXPECT_EQ(r.out["traces"][0]["reason"], "the diagnosis turned input-bound");
  EXPECT_EQ(r.out["traces"][1]["reason"], "the diagnosis turned under-used");
}

TEST(Profile, AutoRecordsNothingMoreOnceTheTracesReachTheirCap) {
  // Two turns of the diagnosis; the first trace alone passes the 1-byte cap.
  test::TempDir dir;
  ProfileOptions p;
  p.auto_every_s = 0;
  p.max_total_bytes = 1;
  const AutoRun r = run_auto(
      dir.path(),
      p,
      0,
      {{30, "input-bound"}, {50, "healthy"}, {70, "memory-growing"}});
  EXPECT_EQ(r.recorded, (std::vector<std::int64_t>{31, 32})) << r.out;
  EXPECT_EQ(r.out["traces"].size(), 1u);
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
