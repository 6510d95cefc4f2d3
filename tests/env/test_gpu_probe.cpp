#include <gtest/gtest.h>

#include "hotloop/env/gpu_probe.h"
#include "hotloop/env/nvml_api.h"
#include "support/doctor_fixtures.h"

namespace hotloop::env {

using test::nvml_facts;

TEST(GpuProbe, ReadsEveryFactOfAHealthyGpu) {
  const NvmlFacts f = nvml_facts("healthy");
  ASSERT_TRUE(f.loaded);
  EXPECT_EQ(*f.driver_version, "580.159.04");
  EXPECT_EQ(*f.cuda_driver_version, 13000);
  ASSERT_EQ(*f.gpu_count, 1u);
  const GpuFacts& g = f.gpus.at(0);
  EXPECT_EQ(*g.name, "NVIDIA H200");
  EXPECT_EQ(*g.uuid, "GPU-6b3c1a52-0f1e-4c7a-9d2b-1f0e2d3c4b5a");
  EXPECT_EQ(*g.memory_total_bytes, 150754820096ULL);
  EXPECT_EQ(*g.memory_free_bytes, 150754820096ULL - 565182464ULL);
  EXPECT_EQ(*g.temperature_c, 31u);
  EXPECT_EQ(*g.slowdown_temperature_c, 87u);
  EXPECT_DOUBLE_EQ(*g.power_w, 76.0); // NVML reports milliwatts
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 700.0);
  EXPECT_EQ(*g.sm_clock_mhz, 345u);
  EXPECT_EQ(*g.sm_clock_max_mhz, 1980u);
  EXPECT_EQ(*g.throttle_reasons, nvml::kThrottleGpuIdle);
  EXPECT_EQ(g.pcie->generation, 5u);
  EXPECT_EQ(g.pcie->max_width, 16u);
  EXPECT_TRUE(*g.persistence_mode);
  EXPECT_FALSE(*g.mig_enabled);
  EXPECT_EQ(*g.compute_capability, std::make_pair(9, 0));
  EXPECT_TRUE(g.processes->empty());
}

TEST(GpuProbe, ListsOtherProcessesWithNameAndMemory) {
  const GpuFacts g = nvml_facts("busy_memory").gpus.at(0);
  ASSERT_EQ(g.processes->size(), 1u);
  EXPECT_EQ(g.processes->at(0).pid, 31337u);
  EXPECT_EQ(g.processes->at(0).name, "python3");
  EXPECT_EQ(g.processes->at(0).used_bytes, 145463705600ULL);
}

TEST(GpuProbe, NotSupportedFunctionsBecomeMissingFactsWithNvmlsReason) {
  const GpuFacts g = nvml_facts("not_supported").gpus.at(0);
  EXPECT_FALSE(g.power_w.has_value());
  EXPECT_EQ(g.power_w.missing_reason, "Not Supported");
  EXPECT_FALSE(g.pcie.has_value());
  EXPECT_EQ(g.pcie.missing_reason, "Not Supported");
  EXPECT_FALSE(g.processes.has_value());
  EXPECT_TRUE(g.temperature_c.has_value()); // the rest is still read
}

TEST(GpuProbe, AnOldDriverLibraryGivesMissingFactsAndTheV1ProcessList) {
  const NvmlFacts f = nvml_facts("busy_memory", HOTLOOP_TEST_FAKE_NVML_OLD);
  ASSERT_TRUE(f.loaded);
  EXPECT_FALSE(f.cuda_driver_version.has_value());
  const GpuFacts& g = f.gpus.at(0);
  EXPECT_FALSE(g.throttle_reasons.has_value());
  EXPECT_NE(
      g.throttle_reasons.missing_reason.find("missing"), std::string::npos);
  EXPECT_FALSE(g.pcie.has_value());
  EXPECT_FALSE(g.compute_capability.has_value());
  EXPECT_FALSE(g.slowdown_temperature_c.has_value());
  ASSERT_TRUE(
      g.processes.has_value()); // through nvmlDeviceGetComputeRunningProcesses
                                // (v1 layout)
  ASSERT_EQ(g.processes->size(), 1u);
  EXPECT_EQ(g.processes->at(0).used_bytes, 145463705600ULL);
}

TEST(GpuProbe, NoLibraryIsNotLoadedAndNotFound) {
  const NvmlFacts f = probe_nvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(f.loaded);
  EXPECT_FALSE(f.library_found);
  EXPECT_FALSE(f.load_error.empty());
}

TEST(GpuProbe, ThrottleReasonsInWords) {
  EXPECT_TRUE(throttle_reason_names(0).empty());
  EXPECT_EQ(
      throttle_reason_names(
          nvml::kThrottleSwPowerCap | nvml::kThrottleHwThermalSlowdown),
      (std::vector<std::string>{
          "software power cap", "hardware thermal slowdown"}));
  EXPECT_EQ(
      throttle_reason_names(0x1000),
      (std::vector<std::string>{"other (0x1000)"}));
}

TEST(GpuProbe, CudaVersionString) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12020), "12.2");
}

} // namespace hotloop::env
