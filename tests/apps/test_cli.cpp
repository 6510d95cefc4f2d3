// The `hotloop` binary as users run it: flags, help, exit codes, and doctor
// through the fake NVML.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "support/doctor_fixtures.h"

namespace hotloop {
namespace {

struct Result {
  int exit_code = -1;
  std::string out; // stdout and stderr together
};

// Runs the hotloop binary with `args` under `env` (VAR=value pairs) and
// captures its output.
Result run(const std::string& args, const std::string& env = {}) {
  const std::string command =
      env + " " + HOTLOOP_TEST_BINARY + " " + args + " 2>&1";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return r;
  }
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) {
    r.out += buf.data();
  }
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string fake_nvml(const std::string& scenario) {
  return std::string("HOTLOOP_NVML_LIB=") + HOTLOOP_TEST_FAKE_NVML +
      " FAKE_NVML_SCENARIO=" + test::scenario_path(scenario);
}

const std::string kNoDriver = "HOTLOOP_NVML_LIB=/nonexistent/libnvidia-ml.so.1";

} // namespace

TEST(Cli, VersionNamesHotloopGitLibTorchAndCudaLibraries) {
  const Result r = run("--version");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("hotloop 0.1.0 (commit "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LibTorch 2."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA runtime"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL"), std::string::npos) << r.out;
}

TEST(Cli, HelpListsTheCommands) {
  const Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("doctor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("run"), std::string::npos) << r.out;
}

TEST(Cli, DoctorHelpListsEveryFlagWithItsDefault) {
  const Result r = run("doctor --help", "HOTLOOP_NVML_LIB=");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--json",
        "--nvml-lib",
        "--run-dir",
        "--no-kernel-probe",
        "--no-color"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("libnvidia-ml.so.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs"), std::string::npos) << r.out;
}

TEST(Cli, BadUsageExitsWithTwo) {
  EXPECT_EQ(run("no-such-command").exit_code, 2);
  EXPECT_EQ(run("doctor --no-such-flag").exit_code, 2);
  EXPECT_EQ(run("").exit_code, 2); // a command is required
}

TEST(Cli, DoctorWithoutDriverIsCpuOnlyAndExitsZero) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP()
        << "CUDA works here: without NVML this is the 'no telemetry' warning, not CPU-only";
  }
  const Result r = run("doctor --json", kNoDriver);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "cpu-only");
}

TEST(Cli, DoctorTextSaysCpuOnlyWithoutDriver) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "CUDA works here";
  }
  const Result r = run("doctor", kNoDriver);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("verdict: CPU-ONLY"), std::string::npos) << r.out;
}

TEST(Cli, DoctorExitsOneWhenNvmlSeesAGpuCudaCannotUse) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "CUDA works here, so the fake GPU is not 'unusable'";
  }
  const Result r = run("doctor --json", fake_nvml("healthy"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "fail");
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "cuda.available") {
      found = true;
      EXPECT_EQ(c["status"], "FAIL");
      EXPECT_TRUE(c.contains("fix"));
    }
  }
  EXPECT_TRUE(found) << r.out;
}

TEST(Cli, DoctorExitsOneForADriverTooOld) {
  const Result r =
      run("doctor --json --no-kernel-probe", fake_nvml("old_driver"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& c : j["checks"]) {
    if (c["id"] == "cuda.driver_compat") {
      EXPECT_EQ(c["status"], "FAIL") << c.dump();
    }
  }
}

TEST(Cli, NvmlLibFlagOverridesTheEnvironment) {
  const Result r =
      run(std::string("doctor --json --nvml-lib ") + HOTLOOP_TEST_FAKE_NVML,
          kNoDriver + " FAKE_NVML_SCENARIO=" + test::scenario_path("healthy"));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checks"][1]["id"], "nvml.driver");
  EXPECT_EQ(j["checks"][1]["status"], "PASS") << j["checks"][1].dump();
}

TEST(Cli, RunDoesDoctorAndSaysWhatIsNotBuiltYet) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "CUDA works here";
  }
  const Result r = run("run --no-color", kNoDriver);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("[1/4] doctor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("smoke: not built yet"), std::string::npos) << r.out;
}

TEST(Cli, RunStopsWithExitOneWhenDoctorFails) {
  const Result r = run("run --no-color", fake_nvml("old_driver"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("stopping"), std::string::npos) << r.out;
}

} // namespace hotloop
