// Each verdict from the window it names, and the order they come in. The
// diagnosis is a pure function of the window, so no hardware is needed.
#include <gtest/gtest.h>

#include <cmath>

#include "hotloop/env/nvml_api.h"
#include "hotloop/telemetry/diagnosis.h"

namespace hotloop::telemetry {
namespace {

// 50 steps in 10 s on a GPU 97% busy, full clocks, the loader keeping up.
WindowInput busy_gpu() {
  WindowInput w;
  w.first_step = 1;
  w.last_step = 50;
  w.wall_s = 10;
  w.phases = {0.2, 0.1, 3, 6, 0.7, 0};
  w.on_cuda = true;
  GpuWindow g;
  g.samples = 10;
  g.util_mean = 97;
  g.sm_clock_mean = 1980;
  g.sm_clock_max = 1980;
  g.memory_total = 140ull << 30;
  w.gpu = g;
  return w;
}

std::vector<std::string> verdicts(const Diagnosis& d) {
  std::vector<std::string> v;
  for (const auto& f : d.findings) {
    v.push_back(f.verdict);
  }
  return v;
}

} // namespace

TEST(Diagnosis, ABusyGpuAtFullClocksIsHealthy) {
  const Diagnosis d = diagnose(busy_gpu());
  EXPECT_EQ(verdicts(d), std::vector<std::string>{"healthy"});
  EXPECT_NE(d.primary().evidence.find("busy 97%"), std::string::npos)
      << d.primary().evidence;
}

TEST(Diagnosis, DataWaitAboveTheThresholdIsInputBoundWithTheFixes) {
  WindowInput w = busy_gpu();
  w.phases.data_wait = 4; // 40% of 10 s
  w.gpu->util_mean = 55;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "input-bound");
  EXPECT_NE(d.primary().evidence.find("40%"), std::string::npos);
  EXPECT_NE(d.primary().fix.find("--workers"), std::string::npos);
  EXPECT_NE(d.primary().fix.find("--resident"), std::string::npos);
  EXPECT_NE(d.primary().fix.find("hotloop pack"), std::string::npos);
  // A GPU starved by its input is not called under-used on top.
  EXPECT_EQ(verdicts(d), std::vector<std::string>{"input-bound"});
}

TEST(Diagnosis, DataWaitJustUnderTheThresholdIsNotInputBound) {
  WindowInput w = busy_gpu();
  w.phases.data_wait = 0.99; // 9.9%
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
}

TEST(Diagnosis, ExposedCopiesAreTransferBound) {
  WindowInput w = busy_gpu();
  w.phases.copy = 2.5;
  w.gpu->util_mean = 70;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "transfer-bound");
  EXPECT_NE(d.primary().fix.find("pinned"), std::string::npos);
}

TEST(Diagnosis, AnIdleGpuWithoutDataWaitIsUnderUsed) {
  WindowInput w = busy_gpu();
  w.gpu->util_mean = 35;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "under-used");
  EXPECT_NE(d.primary().fix.find("larger --batch"), std::string::npos);
  EXPECT_NE(d.primary().fix.find("CUDA graphs"), std::string::npos);
}

TEST(Diagnosis, ThermalThrottlingNamesTheReasonClocksAndTemperature) {
  WindowInput w = busy_gpu();
  w.gpu->slowing_mask =
      nvml::kThrottleHwThermalSlowdown | nvml::kThrottleSwThermalSlowdown;
  w.gpu->slowed_samples = 8;
  w.gpu->sm_clock_mean = 1215;
  w.gpu->temperature_max = 89;
  w.gpu->slowdown_temperature = 87;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "throttled-thermal");
  EXPECT_NE(d.primary().evidence.find("1215 of 1980 MHz"), std::string::npos)
      << d.primary().evidence;
  EXPECT_NE(d.primary().evidence.find("89 °C"), std::string::npos);
  EXPECT_NE(d.primary().fix.find("airflow"), std::string::npos);
}

TEST(Diagnosis, APowerCapWithLowClocksIsThrottledPower) {
  WindowInput w = busy_gpu();
  w.gpu->slowing_mask = nvml::kThrottleSwPowerCap;
  w.gpu->slowed_samples = 10;
  w.gpu->sm_clock_mean = 1400;
  w.gpu->power_mean = 699;
  w.gpu->power_limit = 700;
  EXPECT_EQ(diagnose(w).primary().verdict, "throttled-power");
}

TEST(Diagnosis, APowerCapReasonAtFullClocksIsNotThrottling) {
  WindowInput w = busy_gpu();
  w.gpu->slowing_mask = nvml::kThrottleSwPowerCap;
  w.gpu->sm_clock_mean = 1950; // within 10% of max
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
}

TEST(Diagnosis, AnotherProcessOnTheGpuIsNamed) {
  WindowInput w = busy_gpu();
  w.gpu->other_processes = {{31337, "python3", 8ull << 30}};
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "other-process");
  EXPECT_NE(
      d.primary().evidence.find("python3 (pid 31337, 8.0 GiB)"),
      std::string::npos)
      << d.primary().evidence;
}

TEST(Diagnosis, AllocatedMemoryGrowingWindowAfterWindowIsALeak) {
  WindowInput w = busy_gpu();
  w.memory_history = {1ull << 30, 2ull << 30, 3ull << 30, 4ull << 30};
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "memory-leak");
  EXPECT_NE(d.primary().fix.find(".item()"), std::string::npos);
}

// Each threshold just either side of its edge (DiagnosisOptions' defaults):
// the verdict appears on one side only.

TEST(Diagnosis, BusyNinetyPercentIsTheEdgeOfUnderUsed) {
  WindowInput w = busy_gpu();
  w.gpu->util_mean = 90; // at the edge: busy enough
  EXPECT_EQ(verdicts(diagnose(w)), std::vector<std::string>{"healthy"});
  w.gpu->util_mean = 89.9;
  EXPECT_EQ(verdicts(diagnose(w)), std::vector<std::string>{"under-used"});
}

TEST(Diagnosis, DataWaitTenPercentIsTheEdgeOfInputBound) {
  WindowInput w = busy_gpu();
  w.phases.data_wait = 1.0; // 10% of 10 s: at the edge, not above
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  w.phases.data_wait = 1.001;
  EXPECT_EQ(diagnose(w).primary().verdict, "input-bound");
}

TEST(Diagnosis, ExposedCopyTenPercentIsTheEdgeOfTransferBound) {
  WindowInput w = busy_gpu();
  w.phases.copy = 1.0;
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  w.phases.copy = 1.001;
  EXPECT_EQ(verdicts(diagnose(w)), std::vector<std::string>{"transfer-bound"});
  // Copies on the CPU are not transfers to a device.
  w.on_cuda = false;
  EXPECT_NE(diagnose(w).primary().verdict, "transfer-bound");
}

TEST(Diagnosis, ClocksUnderNinetyPercentOfMaxWhileSlowedAreThrottled) {
  WindowInput w = busy_gpu();
  w.gpu->slowing_mask = nvml::kThrottleHwSlowdown; // neither thermal nor power
  w.gpu->slowed_samples = 10;
  w.gpu->sm_clock_mean = 0.9 * 1980; // at the edge: not below
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  w.gpu->sm_clock_mean = 0.9 * 1980 - 1;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(verdicts(d), std::vector<std::string>{"throttled"});
  EXPECT_NE(d.primary().evidence.find("hardware slowdown"), std::string::npos)
      << d.primary().evidence;
  EXPECT_NE(
      d.primary().fix.find("nvidia-smi -q -d PERFORMANCE"), std::string::npos);
  // Low clocks with no slowing reason (an idle boost state) are not
  // throttling.
  w.gpu->slowing_mask = 0;
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
}

TEST(Diagnosis, MemoryGrowingMoreThanOnePercentInEachOfThreeWindowsIsALeak) {
  WindowInput w = busy_gpu();
  // Each window just over 1% above the one before.
  w.memory_history = {1'000'000, 1'010'001, 1'020'102, 1'030'304};
  EXPECT_EQ(diagnose(w).primary().verdict, "memory-leak");
  // Exactly 1% in one of the three: not a leak.
  w.memory_history = {1'000'000, 1'010'000, 1'020'102, 1'030'304};
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  // Growth in only two windows (a warm-up's allocations): not yet.
  w.memory_history = {1'010'001, 1'020'102, 1'030'304};
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  // Grew, then stopped: not a leak.
  w.memory_history = {1'000'000, 1'010'001, 1'020'102, 1'030'304, 1'030'304};
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
}

TEST(Diagnosis, ARankBusierThanOnePointTwoTimesTheMedianIsTheStraggler) {
  WindowInput w = busy_gpu();
  w.ranks = {{0, 0.0, 5.0}, {1, 0.0, 6.0}, {2, 0.0, 5.0}}; // 1.2x: the edge
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  w.ranks = {{0, 0.0, 5.0}, {1, 0.0, 6.001}, {2, 0.0, 5.0}};
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "straggler");
  EXPECT_NE(d.primary().evidence.find("rank 1"), std::string::npos);
  // Its device, not its input, is slower: the fix says where to look.
  EXPECT_NE(d.primary().fix.find("hotloop monitor"), std::string::npos);
}

TEST(Diagnosis, TrainingOnTheCpuBesideAUsableGpuComesFirst) {
  WindowInput w;
  w.first_step = 1;
  w.last_step = 50;
  w.wall_s = 10;
  w.phases.data_wait = 5;
  w.usable_gpu_present = true;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(
      verdicts(d), (std::vector<std::string>{"cpu-with-gpu", "input-bound"}));
  EXPECT_NE(d.primary().fix.find("--device cuda"), std::string::npos);
}

TEST(Diagnosis, ACpuRunWithoutAGpuAndLittleWaitIsHealthy) {
  WindowInput w;
  w.wall_s = 10;
  w.phases.data_wait = 0.1;
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "healthy");
  EXPECT_NE(d.primary().evidence.find("on the CPU"), std::string::npos);
  EXPECT_EQ(to_json(d)["verdict"], "healthy");
}

TEST(Diagnosis, ARankBusierThanTheOthersIsNamedAsTheStraggler) {
  WindowInput w = busy_gpu();
  w.ranks = {{0, 0.1, 5.0}, {1, 3.0, 5.1}, {2, 0.2, 4.9}, {3, 0.1, 5.0}};
  const Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "straggler");
  EXPECT_NE(d.primary().evidence.find("rank 1 is busy"), std::string::npos)
      << d.primary().evidence;
  EXPECT_NE(d.primary().fix.find("--workers"), std::string::npos);
  // Ranks within 20% of each other: no straggler.
  w.ranks = {{0, 0.1, 5.0}, {1, 0.1, 5.5}};
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
}

// Not learning: past the warm-up, a mean loss at 95% of a uniform guess's
// (ln 10 = 2.303 for 10 classes) or above the first window's; either side
// of each edge, and never before the warm-up ends.
TEST(Diagnosis, ALossStuckAtChanceOrRisingAfterTheWarmupIsNotLearning) {
  WindowInput w = busy_gpu();
  w.chance_loss = std::log(10.0);
  w.first_loss_mean = 2.31;
  w.past_warmup = true;
  w.loss_mean = 0.95 * w.chance_loss + 1e-9; // just at the edge
  Diagnosis d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "not-learning") << d.primary().evidence;
  EXPECT_NE(
      d.primary().evidence.find("95% of a uniform guess's 2.303"),
      std::string::npos)
      << d.primary().evidence;
  EXPECT_NE(d.primary().fix.find("lower --lr"), std::string::npos);
  // Behind the speed verdicts (a throughput run on synthetic data, whose
  // labels are noise, never learns), never called healthy.
  w.phases.data_wait = 5;
  EXPECT_EQ(
      verdicts(diagnose(w)),
      (std::vector<std::string>{"input-bound", "not-learning"}));
  w.phases.data_wait = 0.2;

  w.loss_mean = 0.95 * w.chance_loss - 1e-6; // just under: learning
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");

  // Far below chance but above where it started: diverging.
  w.first_loss_mean = 0.5;
  w.loss_mean = 0.5 + 1e-6;
  d = diagnose(w);
  EXPECT_EQ(d.primary().verdict, "not-learning");
  EXPECT_NE(
      d.primary().evidence.find("above the first window's 0.500"),
      std::string::npos)
      << d.primary().evidence;
  w.loss_mean = 0.5; // equal: not above
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");

  // During the warm-up, or with no loss read back yet, nothing is said.
  w.loss_mean = 2.303;
  w.past_warmup = false;
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
  w.past_warmup = true;
  w.loss_mean = std::nan("");
  EXPECT_EQ(diagnose(w).primary().verdict, "healthy");
}

} // namespace hotloop::telemetry
