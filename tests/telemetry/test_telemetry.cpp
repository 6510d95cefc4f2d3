// Telemetry's parts against the fake NVML and on the CPU: the sampler reads
// each scenario and the diagnosis names it; the step phases timed on a clock
// the test drives make the input-bound verdict; a run's telemetry files;
// TensorBoard framing; the
// Prometheus endpoint; `hotloop monitor --once --json`.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include <torch/utils.h>

#include "hotloop/data/data_spec.h"
#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/telemetry/metrics_server.h"
#include "hotloop/telemetry/run_telemetry.h"
#include "hotloop/telemetry/sampler.h"
#include "hotloop/telemetry/tensorboard.h"
#include "hotloop/train/trainer.h"
#include "support/doctor_fixtures.h"
#include "support/telemetry_fixtures.h"
#include "support/temp_dir.h"

namespace hotloop::telemetry {
namespace {

using test::sample_fake_window;

// A window of 50 GPU steps that kept their loader fed.
WindowInput gpu_steps(const Window& w) {
  return test::fed_gpu_steps(w);
}

Window sample_window(const std::string& scenario, std::size_t n) {
  return sample_fake_window(scenario, n);
}

train::TrainSummary train_cnn(
    std::shared_ptr<const data::Dataset> data,
    const std::string& out) {
  train::TrainerOptions o;
  o.model.name = "cnn-small";
  o.model.image.in_channels = 1;
  o.model.image.size = 28;
  o.model.image.num_classes = 10;
  o.batch = 32;
  o.steps = 20;
  o.device = "cpu";
  o.threads = 1;
  o.out_dir = out;
  o.loader.workers = 1;
  o.loader.prefetch_batches = 1;
  o.loader.augment = data::Augment::None;
  o.loader.resident = data::Resident::Off;
  train::CallbackOptions c;
  c.telemetry.diagnosis_window = 10;
  c.telemetry.interval_s = 0.05;
  c.console.log_every_s = 0;
  torch::manual_seed(0);
  return train::Trainer(
             model::make_model(o.model),
             data,
             nullptr,
             o,
             {train::standard_callbacks(c), nullptr})
      .fit();
}

std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
    ::send(fd, request.data(), request.size(), 0);
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
      response.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return response;
}

} // namespace

// A window's utilization is the mean of its samples (the fake reads 40%
// once, then 99%), not its last or first value.
TEST(Telemetry, AWindowsUtilizationIsTheMeanOfItsSamples) {
  const Window w = sample_window("utilization_rising", 4);
  ASSERT_TRUE(w.gpu.has_value());
  ASSERT_GE(w.gpu->samples, 4u);
  const double n = static_cast<double>(w.gpu->samples);
  EXPECT_NEAR(w.gpu->util_mean, (40 + 99 * (n - 1)) / n, 1e-9)
      << w.gpu->samples << " samples";
}

TEST(Telemetry, TheSamplerReadsEveryFactOfABusyGpu) {
  const Window w = sample_window("power_capped", 4);
  ASSERT_TRUE(w.gpu.has_value());
  EXPECT_GE(w.samples, 4u);
  EXPECT_DOUBLE_EQ(w.gpu->util_mean, 100);
  EXPECT_DOUBLE_EQ(w.gpu->memory_util_mean, 60);
  EXPECT_DOUBLE_EQ(w.gpu->sm_clock_mean, 1400);
  EXPECT_EQ(w.gpu->sm_clock_max, 1980u);
  EXPECT_DOUBLE_EQ(w.gpu->pcie_rx_mb_s_mean, 9000);
  EXPECT_DOUBLE_EQ(w.gpu->power_limit, 700);
  EXPECT_GT(w.rss_max, 0u);
}

TEST(Telemetry, FakeThermalThrottlingIsDiagnosedThrottledThermal) {
  const Diagnosis d = diagnose(gpu_steps(sample_window("thermal", 5)));
  EXPECT_EQ(d.primary().verdict, "throttled-thermal") << d.primary().evidence;
  EXPECT_NE(d.primary().evidence.find("1215 of 1980 MHz"), std::string::npos);
}

TEST(Telemetry, AFakePowerCapIsDiagnosedThrottledPower) {
  const Diagnosis d = diagnose(gpu_steps(sample_window("power_capped", 5)));
  EXPECT_EQ(d.primary().verdict, "throttled-power") << d.primary().evidence;
  EXPECT_NE(d.primary().evidence.find("699 of 700 W"), std::string::npos)
      << d.primary().evidence;
}

TEST(Telemetry, AnotherProcessOnTheFakeGpuIsDiagnosed) {
  const Diagnosis d = diagnose(gpu_steps(sample_window("busy_memory", 3)));
  std::string found;
  for (const auto& f : d.findings) {
    if (f.verdict == "other-process") {
      found = f.evidence;
    }
  }
  EXPECT_NE(found.find("python3 (pid 31337"), std::string::npos) << found;
}

TEST(Telemetry, FakeMemoryGrowingWindowAfterWindowIsALeakAndABusyGpuIsHealthy) {
  // Four windows of the leaking scenario: used memory at each window's end.
  test::ScopedEnv env(
      "FAKE_NVML_SCENARIO", test::scenario_path("memory_growth"));
  SamplerOptions o;
  o.interval_s = 0.005;
  o.nvml_library = HOTLOOP_TEST_FAKE_NVML;
  Sampler s(o);
  WindowInput in = gpu_steps({});
  in.memory_source = "the GPU's used memory";
  for (int i = 0; i < 4; ++i) {
    const std::size_t target = s.samples_taken() + 3;
    while (s.samples_taken() < target) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const Window w = s.take_window();
    ASSERT_TRUE(w.gpu.has_value());
    in.gpu = w.gpu;
    in.memory_history.push_back(w.gpu->memory_used_last);
  }
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.primary().verdict, "memory-leak") << d.primary().evidence;

  EXPECT_EQ(
      diagnose(gpu_steps(sample_window("busy", 3))).primary().verdict,
      "healthy");
}

// The host's phases as RunTelemetry times them, on a clock the test
// advances: 20 steps of 10 ms whose data phase takes `data_ms`, windows of
// 10. Returns each window's verdict.
std::vector<std::string> verdicts_for_data_wait(double data_ms) {
  auto t = std::make_shared<std::chrono::steady_clock::time_point>();
  RunTelemetryOptions o;
  o.window_steps = 10;
  o.interval_s = 60; // the sampler plays no part
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  o.clock = [t] { return *t; };
  RunTelemetry run(o, c10::Device(c10::kCPU), "");
  auto advance = [&](double ms) {
    *t += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double, std::milli>(ms));
  };
  std::vector<std::string> verdicts;
  for (std::int64_t step = 1; step <= 20; ++step) {
    run.begin_step();
    run.enter_phase(Phase::Data);
    advance(data_ms);
    run.enter_phase(Phase::Forward);
    advance((10 - data_ms) / 2);
    run.enter_phase(Phase::Backward);
    advance((10 - data_ms) / 2);
    const StepOutput out = run.end_step({step, 0, 0.1, 0.010, 3200});
    EXPECT_NEAR(out.phases_ms.at("data_wait").get<double>(), data_ms, 1e-6);
    if (out.window) {
      verdicts.push_back((*out.window)["diagnosis"]["verdict"]);
    }
  }
  return verdicts;
}

TEST(Telemetry, StepsThatWaitForDataOverTenPercentOfTheTimeAreInputBound) {
  EXPECT_EQ(
      verdicts_for_data_wait(6),
      (std::vector<std::string>{"input-bound", "input-bound"}));
  EXPECT_EQ(
      verdicts_for_data_wait(1.05),
      (std::vector<std::string>{"input-bound", "input-bound"}));
  EXPECT_EQ(
      verdicts_for_data_wait(0.95),
      (std::vector<std::string>{"healthy", "healthy"}));
}

TEST(Telemetry, ATrainingRunWritesSamplesDiagnosesPhasesAndEventFiles) {
  test::TempDir dir;
  const std::shared_ptr<const data::Dataset> data = data::open_dataset(
      data::parse_data_spec("synthetic:1024x1x28x28"), data::Split::Train, 1);
  const train::TrainSummary s = train_cnn(data, (dir.path() / "run").string());
  // Two windows of 10 steps, each with a verdict (which one depends on
  // this machine's load: the verdicts' logic is tested above).
  int windows = 0;
  for (const auto& [verdict, n] :
       s.callbacks["telemetry"]["verdict_windows"].items()) {
    windows += n.get<int>();
  }
  EXPECT_EQ(windows, 2) << s.callbacks.dump();

  // The run directory has the sampler's lines, the diagnosis lines in
  // metrics.jsonl, per-step phases, and a TensorBoard event file.
  const auto run = dir.path() / "run";
  std::ifstream telemetry_lines(run / "telemetry.jsonl");
  std::string first;
  ASSERT_TRUE(std::getline(telemetry_lines, first));
  EXPECT_TRUE(nlohmann::json::parse(first).contains("host"));
  int diagnoses = 0;
  int phases = 0;
  std::ifstream metrics(run / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    diagnoses += j.contains("diagnosis") ? 1 : 0;
    phases += j.contains("phases_ms") ? 1 : 0;
  }
  EXPECT_EQ(diagnoses, 2);
  EXPECT_EQ(phases, 20);
  bool events = false;
  for (const auto& e : std::filesystem::directory_iterator(run)) {
    events = events ||
        e.path().filename().string().starts_with("events.out.tfevents.");
  }
  EXPECT_TRUE(events);
  // Its speed (the sampler's overhead) is measured in bench/
  // (telemetry_overhead.py), not here.
  const auto summary =
      nlohmann::json::parse(std::ifstream(run / "summary.json"));
  EXPECT_EQ(
      summary["diagnosis"], s.callbacks["telemetry"]["diagnosis"]["verdict"]);
  EXPECT_TRUE(summary.contains("telemetry_overhead"));
}

TEST(Telemetry, Crc32cMatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Telemetry, TensorBoardRecordsAreFramedWithMaskedCrcs) {
  test::TempDir dir;
  TensorBoardWriter w(dir.path().string());
  w.scalars(7, {{"train/loss", 0.5}});
  w.flush();
  std::ifstream in(w.path(), std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  // Two records: the file version, then the scalar event.
  std::size_t at = 0;
  int records = 0;
  while (at + 12 <= bytes.size()) {
    std::uint64_t len = 0;
    std::memcpy(&len, bytes.data() + at, 8);
    std::uint32_t len_crc = 0;
    std::memcpy(&len_crc, bytes.data() + at + 8, 4);
    EXPECT_EQ(len_crc, masked_crc32c(std::string_view(bytes).substr(at, 8)));
    const std::string_view data = std::string_view(bytes).substr(at + 12, len);
    std::uint32_t data_crc = 0;
    std::memcpy(&data_crc, bytes.data() + at + 12 + len, 4);
    EXPECT_EQ(data_crc, masked_crc32c(data));
    if (records == 0) {
      EXPECT_NE(data.find("brain.Event:2"), std::string_view::npos);
    } else {
      EXPECT_NE(data.find("train/loss"), std::string_view::npos);
    }
    at += 12 + len + 4;
    ++records;
  }
  EXPECT_EQ(at, bytes.size());
  EXPECT_EQ(records, 2);
}

TEST(Telemetry, ThePrometheusEndpointServesTheNewestTextOnLoopback) {
  MetricsServer server(0);
  ASSERT_GT(server.port(), 0);
  server.publish("hotloop_step 3\n");
  std::string r = http_get(server.port(), "/metrics");
  EXPECT_NE(r.find("200 OK"), std::string::npos) << r;
  EXPECT_NE(r.find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(r.find("\r\n\r\nhotloop_step 3\n"), std::string::npos) << r;
  server.publish("hotloop_step 4\n");
  EXPECT_NE(
      http_get(server.port(), "/metrics").find("hotloop_step 4"),
      std::string::npos);
  EXPECT_NE(http_get(server.port(), "/other").find("404"), std::string::npos);
  // A port in use is a usage error naming it.
  EXPECT_THROW(MetricsServer second(server.port()), UsageError);
}

TEST(Telemetry, MonitorOnceJsonPrintsEveryGpuWithThrottleReasonsInWords) {
  const auto [code, out] = test::monitor_once_json("thermal");
  EXPECT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["util_percent"], 100);
  EXPECT_EQ(j["gpus"][0]["temperature_c"], 89);
  EXPECT_EQ(j["gpus"][0]["sm_clock_mhz"], 1215);
  const auto reasons = j["gpus"][0]["throttle_reasons"].dump();
  EXPECT_NE(reasons.find("thermal"), std::string::npos) << reasons;
}

} // namespace hotloop::telemetry
