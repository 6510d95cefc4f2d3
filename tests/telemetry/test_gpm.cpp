// GPM counters through the fake NVML (the real loader and sampler; only the
// driver is simulated): the metrics between two samples, a GPU without GPM
// and a driver without the functions skipped with the reason, the sampler's
// window and telemetry.jsonl's fields, and the verdicts built on them:
// tensor-idle (fp32 only), memory-bound and launch-bound.
#include <gtest/gtest.h>

#include "hotloop/env/nvml_library.h"
#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/telemetry/gpm.h"
#include "hotloop/telemetry/prometheus.h"
#include "hotloop/telemetry/sampler.h"
#include "hotloop/telemetry/samples.h"
#include "support/doctor_fixtures.h"
#include "support/scoped_env.h"
#include "support/telemetry_fixtures.h"

namespace hotloop::telemetry {
namespace {

struct Gpu {
  std::unique_ptr<nvml::Library> lib;
  nvml::Device device = nullptr;
};

Gpu open_gpu(const char* library) {
  Gpu g;
  g.lib = nvml::Library::open(library);
  EXPECT_EQ(
      g.lib->fn().device_get_handle_by_index(0, &g.device), nvml::kSuccess);
  return g;
}

TEST(Gpm, TwoSamplesGiveTheMetricsBetweenThem) {
  test::ScopedEnv env(
      "FAKE_NVML_SCENARIO", test::scenario_path("gpm_tensor_idle"));
  Gpu g = open_gpu(HOTLOOP_TEST_FAKE_NVML);
  GpmSampler gpm(*g.lib);
  EXPECT_FALSE(gpm.read(0, g.device)); // the first sample: nothing yet
  EXPECT_EQ(gpm.skip_reason(0), "");
  const std::optional<GpmMetrics> m = gpm.read(0, g.device);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->sm_active_percent, 92.0);
  EXPECT_EQ(m->sm_occupancy_percent, 41.5);
  EXPECT_EQ(m->tensor_active_percent, 0.5);
  EXPECT_EQ(m->hmma_active_percent, 0.0);
  EXPECT_EQ(m->dram_bw_percent, 35.0);
  EXPECT_EQ(m->pcie_rx_mib_s, 5800.0);
  EXPECT_EQ(m->nvlink_tx_mib_s, 0.0);
  EXPECT_TRUE(gpm.read(0, g.device)); // and again
  // telemetry.jsonl's line for the GPU carries them.
  GpmSampler fresh(*g.lib);
  (void)sample_gpus(*g.lib, &fresh);
  const nlohmann::json j = to_json(sample_gpus(*g.lib, &fresh).at(0));
  EXPECT_EQ(j["gpm"]["tensor_active_percent"], 0.5) << j.dump();
  EXPECT_EQ(j["gpm_skip"], "");
}

TEST(Gpm, AGpuWithoutGpmIsSkippedWithTheReason) {
  test::ScopedEnv env("FAKE_NVML_SCENARIO", test::scenario_path("healthy"));
  Gpu g = open_gpu(HOTLOOP_TEST_FAKE_NVML);
  GpmSampler gpm(*g.lib);
  EXPECT_FALSE(gpm.read(0, g.device));
  EXPECT_FALSE(gpm.read(0, g.device));
  EXPECT_NE(gpm.skip_reason(0).find("no GPM counters"), std::string::npos)
      << gpm.skip_reason(0);
}

// A GPU in MIG mode says it supports GPM, then refuses every sample: that
// is a skip with its reason, said once, not a sample missed every second.
TEST(Gpm, AGpuInMigModeIsSkippedWithTheReasonNotMissedEverySample) {
  test::ScopedEnv env("FAKE_NVML_SCENARIO", test::scenario_path("gpm_mig"));
  Gpu g = open_gpu(HOTLOOP_TEST_FAKE_NVML);
  GpmSampler gpm(*g.lib);
  EXPECT_FALSE(gpm.read(0, g.device));
  EXPECT_NE(gpm.skip_reason(0).find("MIG mode"), std::string::npos)
      << gpm.skip_reason(0);
  EXPECT_NE(gpm.skip_reason(0).find("Not Supported"), std::string::npos)
      << gpm.skip_reason(0);
  EXPECT_FALSE(gpm.read(0, g.device));
  const nlohmann::json j = to_json(sample_gpus(*g.lib, &gpm).at(0));
  EXPECT_NE(j["gpm_skip"].get<std::string>().find("MIG"), std::string::npos)
      << j.dump();
}

TEST(Gpm, ADriverWithoutTheFunctionsIsSkippedWithTheReason) {
  test::ScopedEnv env(
      "FAKE_NVML_SCENARIO", test::scenario_path("gpm_tensor_idle"));
  Gpu g = open_gpu(HOTLOOP_TEST_FAKE_NVML_OLD);
  GpmSampler gpm(*g.lib);
  EXPECT_FALSE(gpm.read(0, g.device));
  EXPECT_FALSE(gpm.read(0, g.device));
  EXPECT_NE(gpm.skip_reason(0).find("no GPM functions"), std::string::npos)
      << gpm.skip_reason(0);
}

using test::fed_gpu_steps;
using test::sample_fake_window;

TEST(Gpm, TheWindowAveragesTheCountersAndFp32WithIdleTensorCoresIsTensorIdle) {
  const Window w = sample_fake_window("gpm_tensor_idle", 4);
  ASSERT_TRUE(w.gpu);
  EXPECT_GE(w.gpu->gpm_samples, 2u); // every sample after the first
  EXPECT_DOUBLE_EQ(w.gpu->sm_active_mean, 92);
  EXPECT_DOUBLE_EQ(w.gpu->tensor_active_mean, 0.5);
  const Diagnosis fp32 = diagnose(fed_gpu_steps(w, "fp32"));
  EXPECT_EQ(fp32.primary().verdict, "tensor-idle") << fp32.primary().evidence;
  EXPECT_NE(
      fp32.primary().evidence.find("tensor cores 0.5%"), std::string::npos)
      << fp32.primary().evidence;
  EXPECT_NE(fp32.primary().fix.find("--precision bf16"), std::string::npos);
  // The same counters in bf16 are not blamed on the precision.
  EXPECT_EQ(diagnose(fed_gpu_steps(w, "bf16")).primary().verdict, "healthy");
}

TEST(Gpm, DramNearItsPeakWithLittleTensorWorkIsMemoryBound) {
  const Diagnosis d = diagnose(
      fed_gpu_steps(sample_fake_window("gpm_memory_bound", 4), "bf16"));
  EXPECT_EQ(d.primary().verdict, "memory-bound") << d.primary().evidence;
  EXPECT_NE(
      d.primary().evidence.find("DRAM bandwidth at 91%"), std::string::npos)
      << d.primary().evidence;
}

TEST(Gpm, SmActivityFarBelowGpuUtilizationIsLaunchBound) {
  const Diagnosis d = diagnose(
      fed_gpu_steps(sample_fake_window("gpm_launch_bound", 4), "bf16"));
  EXPECT_EQ(d.primary().verdict, "launch-bound") << d.primary().evidence;
  EXPECT_NE(d.primary().evidence.find("utilization was 95%"), std::string::npos)
      << d.primary().evidence;
  EXPECT_NE(d.primary().fix.find("CUDA graphs"), std::string::npos);
}

// The launch-bound rule at its edge: SM activity below half the GPU's
// utilization (96% busy: 48% is the edge, exact in doubles).
TEST(Gpm, LaunchBoundIsStrictlyBelowHalfTheUtilization) {
  Window w;
  GpuWindow g;
  g.samples = 4;
  g.gpm_samples = 3;
  g.util_mean = 96;
  g.dram_bw_mean = 10;
  g.tensor_active_mean = 50;
  g.sm_active_mean = 48;
  w.gpu = g;
  EXPECT_EQ(diagnose(fed_gpu_steps(w, "bf16")).primary().verdict, "healthy");
  w.gpu->sm_active_mean = 47.9;
  EXPECT_EQ(
      diagnose(fed_gpu_steps(w, "bf16")).primary().verdict, "launch-bound");
}

TEST(Gpm, BusyTensorCoresAreHealthy) {
  const Diagnosis d =
      diagnose(fed_gpu_steps(sample_fake_window("gpm_busy", 4), "bf16"));
  EXPECT_EQ(d.primary().verdict, "healthy") << d.primary().evidence;
}

TEST(Gpm, MonitorAndPrometheusShowTheCounters) {
  // monitor --once: its first line has the counters (it samples them once
  // before, to measure between).
  const auto [code, out] = test::monitor_once_json("gpm_tensor_idle");
  EXPECT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpus"][0]["gpm"]["sm_active_percent"], 92.0) << out;
  EXPECT_EQ(j["gpus"][0]["gpm"]["tensor_active_percent"], 0.5) << out;

  // Prometheus: a gauge per counter, for the GPUs that have them.
  Sample s;
  GpuSample g;
  g.index = 0;
  g.gpm = GpmMetrics{};
  g.gpm->tensor_active_percent = 61.5;
  s.gpus = {g};
  const std::string text =
      prometheus_text(StepRecord{}, s, std::nullopt, {}, true);
  EXPECT_NE(
      text.find("hotloop_gpu_tensor_active_percent{gpu=\"0\"} 61.5"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("hotloop_gpu_sm_active_percent"), std::string::npos);
}

} // namespace
} // namespace hotloop::telemetry
