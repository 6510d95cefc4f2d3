// `hotloop smoke`, `hotloop bench` and `hotloop audit` as users run them: a
// tiny CPU matrix from a matrix file, its report rendered by headless
// Chromium (Debian's chromium, installed by scripts/setup) into a
// screenshot, a wrong matrix key, and an audit against a baseline with an
// injected slowdown.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "support/cli_process.h"
#include "support/temp_dir.h"

namespace hotloop {
namespace {

namespace fs = std::filesystem;

const std::string kNoDriver = "HOTLOOP_NVML_LIB=/nonexistent/libnvidia-ml.so.1";

// Two CPU rows of cnn-small on synthetic data, 10 steps: seconds.
fs::path tiny_matrix(const fs::path& dir, int steps = 10) {
  const fs::path p = dir / "matrix.toml";
  std::ofstream(p) << "steps = " << steps
                   << "\n"
                      "grow_gpu_batch = false\n"
                      "[matrix]\n"
                      "devices = [\"cpu\"]\n"
                      "precisions = [\"fp32\", \"mixed\"]\n"
                      "batches = [16]\n"
                      "models = [\"cnn-small\"]\n"
                      "data = \"synthetic:256x1x28x28\"\n";
  return p;
}

} // namespace

TEST(BenchCli, SmokeExitsOneAtAnInjectedFailureAndZeroOtherwise) {
  const std::string args =
      "smoke --no-color --device cpu --model cnn-small --data synthetic:64x1x28x28 --batch 16 --overfit-steps 80";
  const test::CliResult ok = test::run_cli(args, kNoDriver);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("smoke: passed"), std::string::npos) << ok.out;
  const test::CliResult bad =
      test::run_cli(args, kNoDriver + " HOTLOOP_SMOKE_INJECT=overfit");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("FAIL overfit"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("SKIP mixed-precision  not run"), std::string::npos)
      << bad.out;
}

TEST(BenchCli, AMatrixFileRunsItsRowsAndTheReportRendersInChromium) {
  test::TempDir dir;
  const fs::path out = dir.path() / "bench";
  const test::CliResult r = test::run_cli(
      "bench --matrix " + tiny_matrix(dir.path(), 30).string() +
          " --steps 10 --eval-samples 64 --out " + out.string(),
      kNoDriver);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The file says 30 steps; --steps 10 on the command line wins.
  EXPECT_NE(r.out.find("bench: 2 row(s), 10 steps each"), std::string::npos)
      << r.out;
  const auto results = nlohmann::json::parse(test::slurp(out / "results.json"));
  ASSERT_EQ(results["rows"].size(), 2u);
  EXPECT_EQ(results["rows"][1]["resolved_precision"], "bf16");
  EXPECT_TRUE(results["environment"].contains("git_commit"));
  EXPECT_NE(
      test::slurp(out / "report.md")
          .find("| cpu bf16 cnn-small b16 | ok | 10 |"),
      std::string::npos)
      << test::slurp(out / "report.md");

  // Headless Chromium draws the page: a screenshot of real size says the
  // SVG rendered (an empty or broken page is a few KB of white).
  const fs::path png = dir.path() / "report.png";
  const std::string chromium =
      "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--window-size=1100,1800 --screenshot=" +
      png.string() + " file://" + (out / "report.html").string() +
      " >/dev/null 2>&1";
  ASSERT_EQ(std::system(chromium.c_str()), 0)
      << "chromium failed (scripts/setup installs Debian's chromium): "
      << chromium;
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 30000u);
}

TEST(BenchCli, AnUnknownMatrixKeyIsBadUsageNamingIt) {
  test::TempDir dir;
  const fs::path p = dir.path() / "m.toml";
  std::ofstream(p) << "[matrix]\ndevice = [\"cpu\"]\n";
  const test::CliResult r =
      test::run_cli("bench --matrix " + p.string(), kNoDriver);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown key 'device' in [matrix]"), std::string::npos)
      << r.out;
}

// A value of the wrong kind, as one value or in an array, is bad usage naming
// the key (a single batch of 0 was once taken).
TEST(BenchCli, AMatrixValueOfTheWrongKindIsBadUsageNamingTheKey) {
  test::TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"[[rows]]\nbatch = 0\n", "'batch' must be a positive integer"},
      {"[matrix]\nbatches = [8, 0]\n", "'batches' must be a positive integer"},
      {"[matrix]\nmodels = [\"mlp\", 3]\n", "'models' must be a string"},
      {"[[rows]]\ndevice = 1\n", "'device' must be a string"},
  };
  for (const auto& [text, message] : cases) {
    const fs::path p = dir.path() / "m.toml";
    std::ofstream(p) << text;
    const test::CliResult r =
        test::run_cli("bench --matrix " + p.string(), kNoDriver);
    EXPECT_EQ(r.exit_code, 2) << text << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << text << r.out;
  }
}

// `bench conv` on tiny shapes: one row per shape of a ResNet -small, both
// algorithms timed, and auto's choice exactly where the output map has at
// most 16 pixels. A size below 8 is bad usage.
TEST(BenchCli, ConvTimesBothAlgorithmsForEachShapeAndShowsAutosChoice) {
  const test::CliResult r = test::run_cli(
      "bench conv --batch 2 --size 8 --threads 1 --repeats 1 --json",
      kNoDriver);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["rows"].size(), 10u) << j.dump(2);
  for (const auto& row : j["rows"]) {
    EXPECT_GT(row["onednn_ms"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["gemm_ms"].get<double>(), 0) << row.dump();
    const auto pixels = row["out_size"].get<int>() * row["out_size"].get<int>();
    EXPECT_EQ(row["auto_takes"], pixels <= 16 ? "gemm" : "onednn")
        << row.dump();
  }
  EXPECT_EQ(j["rows"][0]["layer"], "layer1 3x3");
  EXPECT_EQ(j["rows"][0]["auto_takes"], "onednn"); // 8x8
  EXPECT_EQ(test::run_cli("bench conv --size 4", kNoDriver).exit_code, 2);
}

// The audit end to end: rerun a baseline's rows, compare, write the verdicts.
// Its statistics (noise band, verdicts) are tested with built inputs in
// Audit.*; here the baseline is doctored to say row 0 ran a million times
// as fast, so that no load on the machine can hide it (the band is the
// reruns' spread squared: a 10^6 change needs reruns 1000x apart to look
// like noise; a thousand was hidden once by a loaded suite, whose reruns
// were 16x apart and whose baseline run was itself slow). Not a speed
// measurement: that is bench's.
TEST(BenchCli, AuditFlagsTheRowWhoseBaselineWasAMillionTimesAsFast) {
  test::TempDir dir;
  const fs::path base = dir.path() / "base";
  ASSERT_EQ(
      test::run_cli(
          "bench --matrix " + tiny_matrix(dir.path(), 30).string() +
              " --eval-samples 32 --out " + base.string(),
          kNoDriver)
          .exit_code,
      0);
  auto j = nlohmann::json::parse(test::slurp(base / "results.json"));
  j["rows"][0]["images_per_s"] =
      j["rows"][0]["images_per_s"].get<double>() * 1e6;
  const fs::path doctored = dir.path() / "baseline.json";
  std::ofstream(doctored) << j.dump();
  const fs::path out = dir.path() / "audit";
  const test::CliResult r = test::run_cli(
      "audit --baseline " + doctored.string() + " --repeats 3 --out " +
          out.string(),
      kNoDriver);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto a = nlohmann::json::parse(test::slurp(out / "audit.json"));
  ASSERT_EQ(a["rows"].size(), 2u);
  EXPECT_EQ(a["rows"][0]["verdict"], "slower") << a.dump(2);
  EXPECT_LT(a["rows"][0]["change"].get<double>(), -0.9) << a.dump(2);
  const std::set<std::string> verdicts = {"within noise", "slower", "faster"};
  EXPECT_TRUE(verdicts.contains(a["rows"][1]["verdict"].get<std::string>()))
      << a.dump(2);
  EXPECT_NE(
      test::slurp(out / "audit.md").find("**slower**"), std::string::npos);
}

} // namespace hotloop
