// doctor's per-GPU verdicts on the conditions that slow training, one scenario
// each.
#include <gtest/gtest.h>

#include "support/doctor_fixtures.h"

namespace hotloop::env {

using test::check;
using test::facts;

TEST(DoctorGpu, ThermalThrottlingWarnsWithTemperatureClocksAndFix) {
  const Report r = evaluate(facts("thermal"), {});
  const Check& thermal = check(r, "gpu0.thermal");
  EXPECT_EQ(thermal.status, Status::Warn);
  EXPECT_NE(thermal.summary.find("89 °C"), std::string::npos)
      << thermal.summary;
  EXPECT_NE(thermal.summary.find("87 °C"), std::string::npos)
      << thermal.summary;
  EXPECT_FALSE(thermal.fix.empty());
  const Check& throttle = check(r, "gpu0.throttle");
  EXPECT_EQ(throttle.status, Status::Warn);
  EXPECT_NE(
      throttle.summary.find("software thermal slowdown"), std::string::npos)
      << throttle.summary;
  EXPECT_NE(
      throttle.summary.find("hardware thermal slowdown"), std::string::npos)
      << throttle.summary;
  EXPECT_NE(throttle.summary.find("1215 of max 1980 MHz"), std::string::npos)
      << throttle.summary;
  EXPECT_NE(throttle.fix.find("cooling"), std::string::npos);
  EXPECT_EQ(r.verdict, Verdict::Warn);
  EXPECT_EQ(exit_code(r), 0);
}

TEST(DoctorGpu, TemperatureJustBelowTheMarginPasses) {
  DoctorFacts f = facts("healthy");
  f.nvml.gpus[0].temperature_c =
      Probed<unsigned int>::of(81); // slowdown 87, margin 5
  EXPECT_EQ(check(evaluate(f, {}), "gpu0.thermal").status, Status::Pass);
  f.nvml.gpus[0].temperature_c = Probed<unsigned int>::of(82);
  EXPECT_EQ(check(evaluate(f, {}), "gpu0.thermal").status, Status::Warn);
}

TEST(DoctorGpu, AnotherProcessHoldingMostMemoryFailsNamingIt) {
  const Report r = evaluate(facts("busy_memory"), {});
  const Check& c = check(r, "gpu0.memory");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_NE(c.summary.find("pid 31337 python3"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.summary.find("135.5 GiB"), std::string::npos) << c.summary;
  EXPECT_NE(c.fix.find("kill"), std::string::npos);
  EXPECT_EQ(c.facts["other_processes"][0]["pid"], 31337);
  EXPECT_EQ(r.verdict, Verdict::Fail);
  EXPECT_EQ(exit_code(r), 1);
}

TEST(DoctorGpu, AnotherProcessWithRoomLeftWarns) {
  DoctorFacts f = facts("busy_memory");
  auto& g = f.nvml.gpus[0];
  g.processes =
      Probed<std::vector<GpuProcess>>::of({{31337, "python3", 8ULL << 30}});
  g.memory_free_bytes = Probed<std::uint64_t>::of(130ULL << 30);
  EXPECT_EQ(check(evaluate(f, {}), "gpu0.memory").status, Status::Warn);
}

TEST(DoctorGpu, HotloopItselfIsNotAnotherProcess) {
  DoctorFacts f = facts("busy_memory");
  f.self_pid = 31337;
  f.nvml.gpus[0].memory_free_bytes = Probed<std::uint64_t>::of(130ULL << 30);
  EXPECT_EQ(check(evaluate(f, {}), "gpu0.memory").status, Status::Pass);
}

// Inside a container with its own PID namespace NVML's pids are the host's:
// a process whose host pid equals doctor's own number is still another one,
// and `kill` in the container would hit the wrong process.
TEST(DoctorGpu, InAContainerTheFixStopsProcessesFromTheHost) {
  DoctorFacts f = facts("busy_memory");
  f.self_pid = 31337;
  f.host_pids = false;
  const Check& c = check(evaluate(f, {}), "gpu0.memory");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_EQ(c.fix.find("kill"), std::string::npos) << c.fix;
  EXPECT_NE(c.fix.find("from the host"), std::string::npos) << c.fix;
}

TEST(DoctorGpu, PcieLinkTrainedDownUnderLoadWarns) {
  const Check& c = check(evaluate(facts("pcie_down"), {}), "gpu0.pcie");
  EXPECT_EQ(c.status, Status::Warn);
  EXPECT_NE(c.summary.find("x8 of x16"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("gen 3 of 5 under load"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.fix.find("slot"), std::string::npos);
}

TEST(DoctorGpu, LowerPcieGenerationWhileIdleIsPowerSavingNotAFault) {
  const Check& c = check(evaluate(facts("pcie_idle"), {}), "gpu0.pcie");
  EXPECT_EQ(c.status, Status::Pass);
  EXPECT_NE(c.summary.find("power saving"), std::string::npos) << c.summary;
}

TEST(DoctorGpu, PersistenceOffAndPowerCapWarnWithFixes) {
  const Report r = evaluate(facts("persistence_off"), {});
  const Check& pm = check(r, "gpu0.persistence");
  EXPECT_EQ(pm.status, Status::Warn);
  EXPECT_NE(pm.fix.find("nvidia-smi -pm 1"), std::string::npos);
  const Check& throttle = check(r, "gpu0.throttle");
  EXPECT_EQ(throttle.status, Status::Warn);
  EXPECT_NE(throttle.summary.find("software power cap"), std::string::npos);
  EXPECT_NE(throttle.fix.find("700 W"), std::string::npos) << throttle.fix;
}

TEST(DoctorGpu, NotSupportedFactsAreSkippedNotFailed) {
  const Report r = evaluate(facts("not_supported"), {});
  EXPECT_EQ(check(r, "gpu0.pcie").status, Status::Skip);
  EXPECT_NE(
      check(r, "gpu0.pcie").summary.find("Not Supported"), std::string::npos);
  const Check& inv = check(r, "gpu0.inventory");
  EXPECT_EQ(inv.status, Status::Pass);
  EXPECT_EQ(inv.facts["power_w"]["skipped"], "Not Supported");
  EXPECT_NE(inv.summary.find("not readable: "), std::string::npos)
      << inv.summary;
  EXPECT_NE(
      check(r, "gpu0.memory").summary.find("process list not readable"),
      std::string::npos);
  EXPECT_EQ(r.verdict, Verdict::Pass);
}

TEST(
    DoctorGpu,
    FunctionsMissingFromTheLibrarySkipTheirChecksAndNothingCrashes) {
  DoctorFacts f = facts("healthy");
  {
    test::ScopedEnv env("FAKE_NVML_SCENARIO", test::scenario_path("healthy"));
    f.nvml = probe_nvml(HOTLOOP_TEST_FAKE_NVML_OLD);
  }
  const Report r = evaluate(f, {});
  for (const char* id :
       {"gpu0.throttle",
        "gpu0.pcie",
        "gpu0.mig",
        "gpu0.arch",
        "cuda.driver_compat"}) {
    EXPECT_EQ(check(r, id).status, Status::Skip) << id;
    EXPECT_NE(
        check(r, id).summary.find("missing from this NVML library"),
        std::string::npos)
        << id << ": " << check(r, id).summary;
  }
  EXPECT_EQ(
      check(r, "gpu0.thermal").status, Status::Pass); // temperature still read
  EXPECT_EQ(check(r, "gpu0.persistence").status, Status::Pass);
  EXPECT_EQ(r.verdict, Verdict::Pass);
}

} // namespace hotloop::env
