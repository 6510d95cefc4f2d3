#pragma once
// What the telemetry tests share: a sampler window over a fake NVML scenario,
// a window of GPU steps that kept their loader fed, and `hotloop monitor
// --once --json` run against a scenario.

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/telemetry/sampler.h"
#include "support/doctor_fixtures.h"
#include "support/scoped_env.h"
#include "test_paths.h"

namespace hotloop::test {

// Samples `scenario` through the fake NVML every 5 ms until `n` samples are
// in (polling the count: no fixed sleep).
inline telemetry::Window sample_fake_window(
    const std::string& scenario,
    std::size_t n) {
  ScopedEnv env("FAKE_NVML_SCENARIO", scenario_path(scenario));
  telemetry::SamplerOptions o;
  o.interval_s = 0.005;
  o.nvml_library = HOTLOOP_TEST_FAKE_NVML;
  telemetry::Sampler s(o);
  EXPECT_TRUE(s.nvml_loaded()) << s.nvml_error();
  while (s.samples_taken() < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return s.take_window();
}

// A window of 50 GPU steps that kept their loader fed, in `precision`.
inline telemetry::WindowInput fed_gpu_steps(
    const telemetry::Window& w,
    const std::string& precision = "fp32") {
  telemetry::WindowInput in;
  in.first_step = 1;
  in.last_step = 50;
  in.wall_s = 10;
  in.phases = {0.1, 0.1, 3, 6, 0.8, 0};
  in.on_cuda = true;
  in.gpu = w.gpu;
  in.precision = precision;
  return in;
}

// `hotloop monitor --once --json` with the fake NVML's `scenario`: its exit
// code and standard output.
inline std::pair<int, std::string> monitor_once_json(
    const std::string& scenario) {
  const std::string command = std::string("HOTLOOP_NVML_LIB=") +
      HOTLOOP_TEST_FAKE_NVML +
      " FAKE_NVML_SCENARIO=" + scenario_path(scenario) + " " +
      HOTLOOP_TEST_BINARY + " monitor --once --json";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return {-1, ""};
  }
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) {
    out += buf.data();
  }
  return {WEXITSTATUS(::pclose(pipe)), out};
}

} // namespace hotloop::test
