// The test plan's pieces as a library: the smoke ladder (order, stop at the
// first failure, injected and real failures), the matrix runner on a tiny
// CPU matrix (and its time budget), the report's table and charts, and the
// audit's verdicts (an injected slowdown is flagged, noise is not).
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>

#include <torch/cuda.h>

#include "hotloop/errors.h"
#include "hotloop/testplan/audit.h"
#include "hotloop/testplan/matrix.h"
#include "hotloop/testplan/report.h"
#include "hotloop/testplan/smoke.h"
#include "support/cli_process.h"
#include "support/temp_dir.h"

namespace hotloop::testplan {
namespace {

SmokeOptions small_smoke() {
  SmokeOptions o;
  o.model = "cnn-small";
  o.data = "synthetic:64x1x28x28";
  o.batch = 16;
  o.overfit_steps = 80;
  o.doctor.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  return o;
}

std::vector<std::string> statuses(const SmokeReport& r) {
  std::vector<std::string> s;
  for (const auto& rung : r.rungs) {
    s.push_back(env::to_string(rung.status));
  }
  return s;
}

} // namespace

TEST(Smoke, TheLadderRunsInOrderAndSkipsTheGpuRungsWithoutAGpu) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "CUDA works here: the GPU rungs run";
  }
  std::vector<std::string> seen;
  const SmokeReport r = run_smoke(
      small_smoke(), [&](const Rung& rung) { seen.push_back(rung.id); });
  EXPECT_EQ(seen, smoke_rung_ids());
  EXPECT_EQ(
      statuses(r),
      (std::vector<std::string>{
          "SKIP", "PASS", "SKIP", "SKIP", "SKIP", "PASS", "PASS"}));
  EXPECT_NE(r.rungs[0].detail.find("no NVIDIA GPU"), std::string::npos);
  EXPECT_NE(r.rungs[5].detail.find("on cpu: loss"), std::string::npos);
  EXPECT_NE(r.rungs[6].detail.find("bf16 on cpu"), std::string::npos);
  EXPECT_EQ(exit_code(r), 0);
}

TEST(Smoke, AnInjectedFailureStopsTheLadderThere) {
  for (const std::string rung : {"cpu-step", "overfit"}) {
    SmokeOptions o = small_smoke();
    o.inject_failure = rung;
    const SmokeReport r = run_smoke(o);
    bool after = false;
    for (const auto& x : r.rungs) {
      if (x.id == rung) {
        EXPECT_EQ(x.status, env::Status::Fail);
        EXPECT_FALSE(x.fix.empty());
        after = true;
      } else if (after) {
        EXPECT_EQ(x.status, env::Status::Skip) << x.id;
        EXPECT_EQ(x.detail, "not run: an earlier rung failed");
      } else {
        EXPECT_NE(x.status, env::Status::Fail) << x.id;
      }
    }
    EXPECT_TRUE(after) << "no rung named " << rung;
    EXPECT_EQ(exit_code(r), 1);
  }
  SmokeOptions bad = small_smoke();
  bad.inject_failure = "warp-drive";
  EXPECT_THROW(run_smoke(bad), UsageError);
}

TEST(Smoke, AModelThatCannotOverfitFailsWithTheFix) {
  SmokeOptions o = small_smoke();
  o.overfit_steps = 2;
  o.overfit_factor = 1e9; // no model falls that far in 2 steps
  const SmokeReport r = run_smoke(o);
  ASSERT_EQ(r.rungs[5].id, "overfit");
  EXPECT_EQ(r.rungs[5].status, env::Status::Fail);
  EXPECT_NE(r.rungs[5].fix.find("labels misaligned"), std::string::npos);
  EXPECT_EQ(r.rungs[6].status, env::Status::Skip);
}

TEST(Smoke, CudaAskedForWithoutAGpuFailsAtTheFirstRung) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "CUDA works here";
  }
  SmokeOptions o = small_smoke();
  o.device = "cuda";
  const SmokeReport r = run_smoke(o);
  EXPECT_EQ(r.rungs[0].status, env::Status::Fail);
  EXPECT_NE(r.rungs[0].fix.find("hotloop doctor"), std::string::npos);
  EXPECT_EQ(r.rungs[1].status, env::Status::Skip);
}

TEST(Matrix, ATinyCpuMatrixRunsEveryRowAlikeAndSkipsTheGpuRows) {
  test::TempDir dir;
  MatrixOptions o;
  for (const char* precision : {"fp32", "mixed"}) {
    o.rows.push_back(
        {"cpu", precision, 16, "cnn-small", "synthetic:256x1x28x28", false});
  }
  o.rows.push_back(
      {"cuda", "fp32", 16, "cnn-small", "synthetic:256x1x28x28", false});
  o.steps = 12;
  o.eval_samples = 64;
  o.out_dir = dir.path().string();
  o.gpu_available = false;
  int seen = 0;
  const auto rows = run_matrix(o, [&](const RowResult&) { ++seen; });
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(seen, 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rows[i].status, "ok") << rows[i].reason;
    EXPECT_EQ(rows[i].steps, 12);
    EXPECT_EQ(rows[i].losses.size(), 12u);
    EXPECT_GT(rows[i].images_per_s, 0);
    EXPECT_GT(rows[i].median_step_ms, 0);
    // Evaluated on the 64 samples asked for: a whole number of them right.
    EXPECT_GE(rows[i].val_accuracy, 0);
    EXPECT_LE(rows[i].val_accuracy, 1);
    const double right = rows[i].val_accuracy * 64;
    EXPECT_NEAR(right, std::round(right), 1e-6) << rows[i].val_accuracy;
    EXPECT_TRUE(std::isfinite(rows[i].val_loss) && rows[i].val_loss > 0);
    EXPECT_TRUE(rows[i].phases_ms.contains("forward"));
    // No checkpoints: benchmark rows are throwaway.
    EXPECT_FALSE(std::filesystem::exists(
        std::filesystem::path(rows[i].run_dir) / "checkpoints"));
  }
  EXPECT_EQ(rows[1].resolved_precision, "bf16");
  EXPECT_EQ(rows[2].status, "skipped");
  EXPECT_EQ(rows[2].reason, "no GPU");
}

TEST(Matrix, ACpuRowStopsAtItsTimeBudgetAndSaysHowManyStepsItRan) {
  test::TempDir dir;
  MatrixOptions o;
  o.rows.push_back(
      {"cpu", "fp32", 16, "cnn-small", "synthetic:256x1x28x28", false});
  o.steps = 1000000;
  o.cpu_row_seconds = 1.0;
  o.eval_samples = 32;
  o.out_dir = dir.path().string();
  const auto rows = run_matrix(o);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, "ok");
  EXPECT_TRUE(rows[0].cut_by_budget);
  EXPECT_GT(rows[0].steps, 0);
  EXPECT_LT(rows[0].steps, 1000000);
  // The budget is honoured from below (how fast the steps ran is bench's
  // business, not a unit test's).
  EXPECT_GE(rows[0].wall_s, 1.0);
}

namespace {

BenchReport sample_report() {
  BenchReport b;
  b.environment = {
      {"cpu", "Test CPU"},
      {"cpus", 2},
      {"libtorch", "2.11.0"},
      {"command_line", "hotloop bench"}};
  b.steps = 200;
  b.eval_samples = 2000;
  RowResult a;
  a.row = {"cuda", "fp32", 64, "resnet18-small", "fashion-mnist", false};
  a.resolved_precision = "fp32";
  a.steps = 200;
  a.images_per_s = 1000;
  a.median_step_ms = 64;
  a.mean_step_ms = 65;
  a.val_accuracy = 0.8;
  a.losses = {2.3, 1.5, 0.9};
  a.phases_ms = {{"forward", 20.0}, {"backward", 40.0}, {"optimizer", 4.0}};
  a.gpu = {
      {"util_min", 90},
      {"util_max", 99},
      {"temp_min", 40},
      {"temp_max", 55},
      {"power_mean_w", 400.0},
      {"throttle_samples", 0},
      {"samples", 3}};
  a.gpu_series = {
      {{"t", 0.0}, {"util", 90.0}, {"temp", 40.0}, {"mem_gib", 2.0}},
      {{"t", 1.0}, {"util", 99.0}, {"temp", 55.0}, {"mem_gib", 2.5}}};
  RowResult m = a;
  m.row.precision = "mixed";
  m.resolved_precision = "bf16";
  m.images_per_s = 2500;
  m.median_step_ms = 25.6;
  m.model_flops_per_s = 123.4e12;
  m.mfu = 0.1247;
  m.gpu["sm_active_mean"] = 91.6;
  m.gpu["tensor_active_mean"] = 58.2;
  m.gpu["dram_bw_mean"] = 40.0;
  RowResult oom = a;
  oom.row.batch = 4096;
  oom.row.grown = true;
  oom.status = "oom";
  oom.reason = "out of memory";
  b.rows = {a, m, oom};
  return b;
}

} // namespace

TEST(Report, TheTableHasEveryRowAndTheOutOfMemoryRow) {
  const std::string md = report_markdown(sample_report());
  EXPECT_NE(
      md.find(
          "| row | status | steps | mean ms/step | median ms/step | images/s"),
      std::string::npos);
  EXPECT_NE(
      md.find("| cuda fp32 b64 | ok | 200 | 65.0 | 64.0 | 1000 |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| cuda bf16 b64 | ok |"), std::string::npos) << md;
  EXPECT_NE(md.find("| cuda fp32 b4096 | out of memory |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| 90-99 | 40-55 | 400 | 0 | 80.0 |"), std::string::npos)
      << md;
  EXPECT_NE(
      headline(sample_report()).find("Fastest: cuda bf16 b64 at 2500 images/s"),
      std::string::npos);
  EXPECT_NE(
      headline(sample_report()).find("2.50x the fp32 row"), std::string::npos);
}

TEST(Report, LanguageModelRowsAloneGetATokensPerSecondHeadline) {
  BenchReport report = sample_report();
  for (auto& r : report.rows) {
    r.tokens_per_s = r.images_per_s * 128; // as if each were gpt-nano's
  }
  report.rows[0].row.model = "gpt-nano";
  const std::string h = headline(report);
  EXPECT_NE(h.find("Fastest: "), std::string::npos) << h;
  EXPECT_NE(h.find("at 320000 tokens/s"), std::string::npos) << h;
  EXPECT_EQ(h.find("images/s"), std::string::npos) << h;
}

TEST(Report, TheHtmlIsSelfContainedWithItsCharts) {
  const std::string html = report_html(sample_report());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  for (const char* title :
       {"Step time (median ms",
        "Throughput (images/s",
        "Training loss",
        "GPU utilization over each row",
        "GPU temperature over each row",
        "GPU memory used over each row",
        "Where each step's time goes"}) {
    EXPECT_NE(html.find(title), std::string::npos) << title;
  }
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_NE(html.find("out of memory"), std::string::npos);
}

TEST(Report, ResultsJsonRoundTrips) {
  test::TempDir dir;
  write_report(dir.path().string(), sample_report());
  const std::string md = test::slurp(dir.path() / "report.md");
  EXPECT_NE(md.find("| row | status | steps |"), std::string::npos) << md;
  EXPECT_NE(md.find("| cuda bf16 b64 | ok | 200 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2500 | 123.40 (12.5%) |"), std::string::npos)
      << md; // its images/s, model TFLOP/s and MFU
  EXPECT_NE(md.find("| 92 / 58 / 40 |"), std::string::npos) << md; // GPM
  EXPECT_NE(md.find("| cuda fp32 b4096 | out of memory |"), std::string::npos)
      << md;
  const std::string html = test::slurp(dir.path() / "report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("cuda bf16 b64"), std::string::npos);
  const BenchReport back = read_results((dir.path() / "results.json").string());
  ASSERT_EQ(back.rows.size(), 3u);
  EXPECT_EQ(back.steps, 200);
  EXPECT_EQ(back.rows[1].resolved_precision, "bf16");
  EXPECT_EQ(back.rows[1].images_per_s, 2500);
  EXPECT_EQ(back.rows[1].model_flops_per_s, 123.4e12);
  EXPECT_EQ(back.rows[1].mfu, 0.1247);
  EXPECT_FALSE(back.rows[0].mfu);
  EXPECT_EQ(back.rows[2].status, "oom");
  EXPECT_TRUE(back.rows[2].row.grown);
  EXPECT_EQ(back.rows[0].losses.size(), 3u);
  std::ofstream(dir.path() / "bad.json") << "{\"rows\": 3}";
  EXPECT_THROW(read_results((dir.path() / "bad.json").string()), DataError);
}

namespace {

std::vector<RowResult> reruns(std::initializer_list<double> rates) {
  std::vector<RowResult> v;
  for (const double r : rates) {
    RowResult x;
    x.images_per_s = r;
    v.push_back(x);
  }
  return v;
}

} // namespace

TEST(Audit, NoiseIsIgnoredAndAnInjectedSlowdownIsFlagged) {
  RowResult base;
  base.images_per_s = 1000;
  const AuditOptions o; // 5% floor, 2x the spread
  // Reruns within a few percent: within noise.
  AuditRow a = audit_row(base, reruns({970, 1030, 990}), o);
  EXPECT_EQ(a.verdict, "within noise");
  // A noisy machine: 8% down, but the reruns spread 20%: still noise.
  a = audit_row(base, reruns({820, 920, 1020}), o);
  EXPECT_EQ(a.verdict, "within noise") << a.tolerance;
  // The injected slowdown: 40% fewer images/s, reruns tight.
  a = audit_row(base, reruns({600, 610, 590}), o);
  EXPECT_EQ(a.verdict, "slower");
  EXPECT_NEAR(a.change, -0.4, 1e-9);
  a = audit_row(base, reruns({1500, 1510, 1490}), o);
  EXPECT_EQ(a.verdict, "faster");
  // Ten times slower on a noisy machine (reruns spread 1.54x, as a loaded
  // 2-core VM gave): the band is a ratio (1.54^2 = 2.37x), so a 91% drop is
  // still flagged, where "2 x the spread in percent" (97%) would not.
  a = audit_row(base, reruns({137.6, 123.5, 190.1}), o);
  EXPECT_EQ(a.verdict, "slower") << a.tolerance;
  EXPECT_NEAR(a.tolerance, std::pow(190.1 / 123.5, 2) - 1, 1e-9);
  // A row that ran before and now runs out of memory.
  std::vector<RowResult> oom = reruns({0, 0});
  oom[0].status = "oom";
  a = audit_row(base, oom, o);
  EXPECT_EQ(a.verdict, "status changed");
  EXPECT_EQ(regressions({a}), 1);
}

} // namespace hotloop::testplan
