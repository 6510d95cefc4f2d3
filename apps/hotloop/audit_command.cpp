// `hotloop audit --baseline results.json`: reruns a bench matrix a few times
// and flags the rows that moved beyond their run-to-run noise
// (testplan/audit.h).

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench_matrix.h"
#include "cli_common.h"
#include "hotloop/errors.h"
#include "hotloop/testplan/audit.h"
#include "hotloop/testplan/fingerprint.h"

namespace hotloop::cli {

void add_audit_command(CLI::App& app, Action& action) {
  struct Flags {
    std::string baseline;
    std::string out = "runs/audit";
    testplan::AuditOptions options;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "audit",
      "Rerun a bench baseline's matrix and flag rows whose throughput moved beyond run-to-run noise (e.g. after a driver update)");
  cmd->add_option(
         "--baseline", f->baseline, "The results.json `hotloop bench` wrote")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--out", f->out, "Where audit.md, audit.json and the reruns go")
      ->capture_default_str();
  cmd->add_option(
         "--repeats",
         f->options.repeats,
         "Reruns per row; their spread is the row's noise")
      ->capture_default_str();
  cmd->add_option(
         "--min-change",
         f->options.min_change,
         "Smallest relative change that is flagged, whatever the noise")
      ->capture_default_str();
  cmd->add_option(
         "--noise-factor",
         f->options.noise_factor,
         "A change is flagged beyond the reruns' max/min ratio to this power, up or down")
      ->capture_default_str();
  cmd->footer(
      "The rows rerun with the baseline's steps and budget (no GPU batch growth: the baseline's grown rows are rerun as rows).\n"
      "Exit code: 1 when a row is slower or its status changed (ok -> out of memory), else 0.");
  cmd->callback([f, &action] {
    action = [f] {
      if (f->options.repeats < 2) {
        throw UsageError(
            "--repeats must be at least 2 (the noise is the reruns' spread)");
      }
      const testplan::BenchReport baseline =
          testplan::read_results(f->baseline);
      testplan::MatrixOptions mo;
      mo.steps = baseline.steps > 0 ? baseline.steps : 200;
      mo.cpu_row_seconds = baseline.cpu_row_seconds;
      mo.eval_samples =
          baseline.eval_samples > 0 ? baseline.eval_samples : 2000;
      mo.grow_gpu_batch = false;
      for (const auto& r : baseline.rows) {
        mo.rows.push_back(r.row);
      }
      std::vector<std::vector<testplan::RowResult>> reruns(mo.rows.size());
      nlohmann::json environment;
      for (int k = 0; k < f->options.repeats; ++k) {
        fmt::print("audit: rerun {}/{}\n", k + 1, f->options.repeats);
        mo.out_dir =
            (std::filesystem::path(f->out) / fmt::format("rerun-{}", k + 1))
                .string();
        const testplan::BenchReport now = run_bench_matrix(mo, stdout);
        environment = now.environment;
        for (std::size_t i = 0; i < now.rows.size(); ++i) {
          reruns[i].push_back(now.rows[i]);
        }
      }
      std::vector<testplan::AuditRow> rows;
      nlohmann::json j = nlohmann::json::array();
      for (std::size_t i = 0; i < baseline.rows.size(); ++i) {
        rows.push_back(
            testplan::audit_row(baseline.rows[i], reruns[i], f->options));
        j.push_back(testplan::to_json(rows.back()));
      }
      const std::string md = testplan::audit_markdown(
          rows, f->baseline, testplan::describe_environment(environment));
      std::filesystem::create_directories(f->out);
      std::ofstream(std::filesystem::path(f->out) / "audit.md") << md;
      std::ofstream(std::filesystem::path(f->out) / "audit.json")
          << nlohmann::json{{"baseline", f->baseline},
                            {"baseline_environment", baseline.environment},
                            {"environment", environment},
                            {"rows", j}}
                 .dump(2)
          << '\n';
      fmt::print(
          "\n{}\naudit: {}\n",
          md,
          (std::filesystem::path(f->out) / "audit.md").string());
      return testplan::regressions(rows) > 0 ? 1 : 0;
    };
  });
}

} // namespace hotloop::cli
