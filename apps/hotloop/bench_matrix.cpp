#include "bench_matrix.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/env/nvml_library.h"
#include "hotloop/testplan/fingerprint.h"

namespace hotloop::cli {

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw{std::istreambuf_iterator<char>(in), {}};
  std::string out;
  for (const char c : raw) {
    out += c == '\0' ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') {
    out.pop_back();
  }
  return out;
}

bool gpu_available() {
  const cuda::State st = cuda::state();
  return st.available && !st.devices.empty();
}

testplan::BenchReport run_bench_matrix(
    testplan::MatrixOptions options,
    std::FILE* progress) {
  options.gpu_available = gpu_available();
  testplan::BenchReport report;
  report.environment = testplan::environment_fingerprint(
      command_line(), nvml::default_library_path());
  report.steps = options.steps;
  report.cpu_row_seconds = options.cpu_row_seconds;
  report.eval_samples = options.eval_samples;
  fmt::print(
      progress,
      "bench: {} row(s), {} steps each{}{}; {}\n",
      options.rows.size(),
      options.steps,
      options.cpu_row_seconds > 0
          ? fmt::format(", CPU rows at most {:.0f} s", options.cpu_row_seconds)
          : std::string(),
      options.gpu_available && options.grow_gpu_batch
          ? ", then larger GPU batches up to the first out-of-memory"
          : std::string(),
      testplan::describe_environment(report.environment));
  std::fflush(progress);
  std::size_t done = 0;
  report.rows =
      testplan::run_matrix(options, [&](const testplan::RowResult& r) {
        ++done;
        fmt::print(progress, "  [{}] {}\n", done, testplan::to_line(r));
        std::fflush(progress);
      });
  return report;
}

void run_and_report_matrix(testplan::MatrixOptions options) {
  const std::string out = options.out_dir;
  const testplan::BenchReport report =
      run_bench_matrix(std::move(options), stdout);
  testplan::write_report(out, report);
  const std::string best = testplan::headline(report);
  fmt::print(
      "\n{}\nreport: {}\n",
      best.empty() ? "no bench row ran" : best,
      std::filesystem::absolute(std::filesystem::path(out) / "report.html")
          .string());
}

} // namespace hotloop::cli
