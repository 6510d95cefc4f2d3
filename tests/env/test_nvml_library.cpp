#include <gtest/gtest.h>

#include "hotloop/env/nvml_library.h"
#include "support/doctor_fixtures.h"

namespace hotloop::nvml {

using test::scenario_path;
using test::ScopedEnv;

TEST(NvmlLibrary, DefaultPathIsTheDriversLibraryUnlessOverridden) {
  {
    ScopedEnv env("HOTLOOP_NVML_LIB", std::nullopt);
    EXPECT_EQ(default_library_path(), "libnvidia-ml.so.1");
  }
  {
    ScopedEnv env("HOTLOOP_NVML_LIB", "/opt/fake/libnvml.so");
    EXPECT_EQ(default_library_path(), "/opt/fake/libnvml.so");
  }
  {
    ScopedEnv env("HOTLOOP_NVML_LIB", "");
    EXPECT_EQ(default_library_path(), "libnvidia-ml.so.1");
  }
}

TEST(NvmlLibrary, MissingLibraryIsAnOpenErrorThatSaysSoAndHowToFixIt) {
  try {
    Library::open("/nonexistent/libnvidia-ml.so.1");
    FAIL() << "expected OpenError";
  } catch (const OpenError& e) {
    EXPECT_FALSE(e.library_found);
    EXPECT_NE(
        std::string(e.what()).find("/nonexistent/libnvidia-ml.so.1"),
        std::string::npos);
    EXPECT_NE(e.hint().find("HOTLOOP_NVML_LIB"), std::string::npos);
  }
}

TEST(NvmlLibrary, FailedInitIsAnOpenErrorWithNvmlsReason) {
  ScopedEnv env("FAKE_NVML_SCENARIO", scenario_path("driver_not_loaded"));
  try {
    Library::open(HOTLOOP_TEST_FAKE_NVML);
    FAIL() << "expected OpenError";
  } catch (const OpenError& e) {
    EXPECT_TRUE(e.library_found);
    EXPECT_NE(
        std::string(e.what()).find("Driver Not Loaded"), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("kernel module"), std::string::npos) << e.hint();
  }
}

TEST(NvmlLibrary, ResolvesEveryFunctionOfACurrentDriver) {
  ScopedEnv env("FAKE_NVML_SCENARIO", scenario_path("healthy"));
  const auto lib = Library::open(HOTLOOP_TEST_FAKE_NVML);
  const Functions& f = lib->fn();
  EXPECT_NE(f.device_get_current_clocks_event_reasons, nullptr);
  EXPECT_NE(f.device_get_max_pcie_link_width, nullptr);
  EXPECT_NE(f.device_get_compute_running_processes, nullptr);
  EXPECT_NE(f.system_get_cuda_driver_version, nullptr);
}

TEST(NvmlLibrary, FunctionsMissingFromAnOldDriverAreNullAndCallsReportIt) {
  ScopedEnv env("FAKE_NVML_SCENARIO", scenario_path("healthy"));
  const auto lib = Library::open(HOTLOOP_TEST_FAKE_NVML_OLD);
  const Functions& f = lib->fn();
  EXPECT_EQ(f.device_get_current_clocks_event_reasons, nullptr);
  EXPECT_EQ(f.device_get_compute_running_processes, nullptr);
  EXPECT_NE(f.device_get_compute_running_processes_v1, nullptr);
  unsigned long long reasons = 0;
  EXPECT_EQ(
      call(f.device_get_current_clocks_event_reasons, Device{}, &reasons),
      kErrorFunctionNotFound);
  EXPECT_NE(
      lib->error_string(kErrorFunctionNotFound).find("missing"),
      std::string::npos);
}

} // namespace hotloop::nvml
