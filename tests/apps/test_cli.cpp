// The `hotloop` binary as users run it: flags, help, exit codes, and doctor
// through the fake NVML.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "support/cli_process.h"
#include "support/doctor_fixtures.h"
#include "support/image_files.h"
#include "support/temp_dir.h"

namespace hotloop {
namespace {

using Result = test::CliResult;

Result run(
    const std::string& args,
    const std::string& env = {},
    bool stderr_too = true) {
  return test::run_cli(args, env, stderr_too);
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
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "cuda.driver_compat") {
      found = true;
      EXPECT_EQ(c["status"], "FAIL") << c.dump();
    }
  }
  EXPECT_TRUE(found) << j.dump();
}

TEST(Cli, NvmlLibFlagOverridesTheEnvironment) {
  const Result r =
      run(std::string("doctor --json --nvml-lib ") + HOTLOOP_TEST_FAKE_NVML,
          kNoDriver + " FAKE_NVML_SCENARIO=" + test::scenario_path("healthy"));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checks"][1]["id"], "nvml.driver");
  EXPECT_EQ(j["checks"][1]["status"], "PASS") << j["checks"][1].dump();
}

TEST(Cli, RunDoesDoctorSmokeAndBenchAndPointsToTheReport) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "CUDA works here: the GPU rows would run";
  }
  test::TempDir dir;
  const std::string out = (dir.path() / "run").string();
  const Result r = run(
      "run --no-color --model cnn-small --data synthetic:256x1x28x28 --steps 8 --out " +
          out,
      kNoDriver);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* part :
       {"[1/3] doctor",
        "[2/3] smoke: cnn-small",
        "PASS cpu-step",
        "PASS overfit",
        "[3/3] bench: 9 row(s), 8 steps each",
        "cuda fp32 cnn-small b32: skipped: no GPU",
        "cpu fp32 gpt-nano b32: ",
        "Fastest: cpu",
        "report: "}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
  // The language-model row: tokens/s, and not in the images/s headline.
  const std::string md = test::slurp(std::filesystem::path(out) / "report.md");
  EXPECT_NE(md.find("gpt-nano"), std::string::npos) << md;
  EXPECT_NE(md.find(" tok/s |"), std::string::npos) << md;
  const std::size_t fastest = md.find("Fastest:");
  ASSERT_NE(fastest, std::string::npos) << md;
  EXPECT_EQ(
      md.substr(fastest, md.find('\n', fastest) - fastest).find("gpt-nano"),
      std::string::npos)
      << md;
  const std::string html =
      test::slurp(std::filesystem::path(out) / "report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("cnn-small"), std::string::npos);
  EXPECT_NE(html.find("no GPU"), std::string::npos);
}

TEST(Cli, RunStopsWithExitOneWhenDoctorFails) {
  const Result r = run("run --no-color", fake_nvml("old_driver"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("stopping"), std::string::npos) << r.out;
}

TEST(Cli, TuneBatchJsonFindsTheInjectedLimit) {
  const Result r = run(
      "tune batch --model mlp --data synthetic:256x1x8x8 --device cpu --threads 1 --workers 1 --trial-steps 3 --json",
      "HOTLOOP_INJECT_OOM_ABOVE=21",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["max_batch"], 21);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_LE(j["recommended"].get<int>(), 18); // 10% margin
  EXPECT_GE(j["recommended"].get<int>(), 1);
  EXPECT_FALSE(j["reason"].get<std::string>().empty());
  bool saw_oom = false;
  for (const auto& t : j["trials"]) {
    saw_oom = saw_oom || t["result"] == "oom";
    EXPECT_TRUE(t.contains("images_per_s"));
    EXPECT_TRUE(t.contains("peak_reserved_bytes"));
  }
  EXPECT_TRUE(saw_oom);
}

TEST(Cli, TuneBatchExitsOneWhenNothingFits) {
  const Result r = run(
      "tune batch --model mlp --data synthetic:64x1x8x8 --device cpu --threads 1 --workers 1 --trial-steps 3",
      "HOTLOOP_INJECT_OOM_ABOVE=0");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("not even one sample fits"), std::string::npos) << r.out;
}

TEST(Cli, TrainBatchAutoTrainsWithTheFindersRecommendation) {
  test::TempDir dir;
  const Result r = run(
      "train --model mlp --data synthetic:256x1x8x8 --device cpu --threads 1 --workers 1 --steps 3 --batch auto --no-eval --out " +
          (dir.path() / "run").string(),
      "HOTLOOP_INJECT_OOM_ABOVE=40");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream finder_file(dir.path() / "run" / "batch_finder.json");
  const auto finder = nlohmann::json::parse(finder_file);
  EXPECT_EQ(finder["max_batch"], 40);
  std::ifstream summary_file(dir.path() / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(summary_file);
  EXPECT_EQ(summary["micro_batch"], finder["recommended"]);
  EXPECT_EQ(summary["oom_recoveries"], 0);
}

TEST(Cli, TrainWritesAReportWithTheVerdictAndCharts) {
  test::TempDir dir;
  const Result r = run(
      "train --model mlp --data synthetic:256x1x8x8 --device cpu --threads 1 --workers 1 --steps 12 --diagnosis-window 5 --no-eval --out " +
      (dir.path() / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string report = test::slurp(dir.path() / "run" / "report.html");
  const auto summary =
      nlohmann::json::parse(test::slurp(dir.path() / "run" / "summary.json"));
  EXPECT_NE(report.find("<svg"), std::string::npos);
  EXPECT_NE(report.find("Step time"), std::string::npos);
  EXPECT_NE(
      report.find(summary["diagnosis"].get<std::string>()), std::string::npos);
}

TEST(Cli, TrainMicroBatchAutoKeepsTheEffectiveBatch) {
  test::TempDir dir;
  const Result r = run(
      "train --model mlp --data synthetic:256x1x8x8 --device cpu --threads 1 --workers 1 --steps 3 --batch 60 --micro-batch auto --no-eval --out " +
          (dir.path() / "run").string(),
      "HOTLOOP_INJECT_OOM_ABOVE=40");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream summary_file(dir.path() / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(summary_file);
  // The finder searches up to 60, finds 40, recommends at most 36; the
  // largest divisor of 60 up to that is 30 or less.
  const int micro = summary["micro_batch"].get<int>();
  EXPECT_EQ(60 % micro, 0);
  EXPECT_LE(micro, 36);
  EXPECT_EQ(summary["accum_steps"].get<int>() * micro, 60);
}

TEST(Cli, TrainOutOfMemoryAtMicroBatchOneExitsOneWithTheOptions) {
  test::TempDir dir;
  const Result r = run(
      "train --model mlp --data synthetic:64x1x8x8 --device cpu --threads 1 --workers 1 --steps 2 --batch 4 --no-eval --out " +
          (dir.path() / "run").string(),
      "HOTLOOP_INJECT_OOM_ABOVE=0");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("out of memory at micro-batch 1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--precision bf16"), std::string::npos) << r.out;
  // One line per out-of-memory, each at step 1 on the CPU, the micro-batch
  // halving from the batch of 4 down to 1.
  std::ifstream lines(dir.path() / "run" / "oom_report.jsonl");
  std::vector<int> micro;
  for (std::string line; std::getline(lines, line);) {
    const auto report = nlohmann::json::parse(line);
    EXPECT_EQ(report["step"], 1) << line;
    EXPECT_EQ(report["device"], "cpu") << line;
    micro.push_back(report["micro_batch"].get<int>());
  }
  EXPECT_EQ(micro, (std::vector<int>{4, 2, 1}));
}

TEST(Cli, BatchFlagsRejectWhatIsNeitherACountNorAuto) {
  const Result r =
      run("train --model mlp --data synthetic:64x1x8x8 --batch many");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--batch many"), std::string::npos) << r.out;
}

// `data check --decode auto`: each JPEG through the loader's crop decode and
// a full decode with the same crop; the PSNR between them is reported.
TEST(Cli, DataCheckDecodeAutoReportsThePsnrAgainstAFullDecode) {
  test::TempDir dir;
  for (int i = 0; i < 3; ++i) {
    test::write_bytes(
        dir.path() / "train" / "a" / (std::to_string(i) + ".jpg"),
        test::jpeg_file(test::textured_image(600, 800, 3, i), 600, 800, 3));
  }
  const auto r = test::run_cli(
      "data check --json --decode auto --data folder:" + dir.path().string(),
      "",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out)["decode_vs_full"];
  EXPECT_EQ(j["images"], 3);
  EXPECT_EQ(j["regions"], 3);
  EXPECT_GE(j["scaled"].get<int>(), 1);
  EXPECT_GE(j["psnr_db_min"].get<double>(), 32.0);
  EXPECT_TRUE(
      test::run_cli(
          "data check --json --data folder:" + dir.path().string(), "", false)
          .out.find("\"decode_vs_full\": null") != std::string::npos);
  EXPECT_EQ(
      test::run_cli(
          "data check --decode fast --data folder:" + dir.path().string())
          .exit_code,
      2);
}

// --max-image-pixels: the image limit a user raises (or lowers) for a data
// set; an image over it is a bad sample that names the flag, 0 is bad usage.
TEST(Cli, DataCheckTakesTheImageLimitFromMaxImagePixels) {
  test::TempDir dir;
  test::write_bytes(
      dir.path() / "train" / "a" / "big.jpg",
      test::jpeg_file(test::textured_image(40, 50, 3, 1), 40, 50, 3));
  test::write_bytes(
      dir.path() / "train" / "a" / "small.jpg",
      test::jpeg_file(test::textured_image(20, 30, 3, 2), 20, 30, 3));
  const std::string data = " --data folder:" + dir.path().string();
  EXPECT_EQ(run("data check" + data).exit_code, 0);
  const auto r = run("data check --max-image-pixels 1000" + data);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("1 bad"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("big.jpg: 50x40 pixels is more than the 1000"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--max-image-pixels"), std::string::npos) << r.out;
  EXPECT_EQ(run("data check --max-image-pixels 0" + data).exit_code, 2);
}

} // namespace hotloop
