// `hotloop run`: the main job, what the README's first command runs:
// doctor -> smoke -> bench on the built-in default (Fashion-MNIST product
// photos, resnet18-small), then the path of report.html and the table's
// headline. On a machine without a GPU the GPU rows are "skipped: no GPU"
// and each CPU row is cut at --cpu-row-seconds, so the whole job takes about
// five minutes on two cores.

#include <fmt/format.h>

#include "bench_matrix.h"
#include "cli_common.h"
#include "hotloop/cuda/build_info.h"
#include "hotloop/env/doctor.h"
#include "hotloop/testplan/smoke.h"
#include "run_option_flags.h"

namespace hotloop::cli {

void add_run_command(CLI::App& app, Action& action) {
  struct Flags {
    bool no_color = false;
    std::string out = "runs/run";
    train::RunOptions run; // --model --data --steps: `hotloop train`'s flags
    testplan::MatrixOptions matrix;
    env::DoctorOptions doctor;
    bool language_model_row = true;
  };
  auto f = std::make_shared<Flags>();
  f->matrix.cpu_row_seconds = 45;
  f->run.trainer.model.name = "resnet18-small";
  f->run.trainer.steps = f->matrix.steps;
  CLI::App* cmd = app.add_subcommand(
      "run",
      "The main job: doctor, the smoke ladder, then the bench matrix and its report, on the built-in data");
  cmd->add_option("--out", f->out, "Where the report goes")
      ->capture_default_str();
  add_run_flags(cmd, f->run, {"model", "data", "steps"});
  cmd->add_option(
         "--cpu-row-seconds",
         f->matrix.cpu_row_seconds,
         "A CPU row stops after this many seconds (0: all its steps)")
      ->capture_default_str();
  cmd->add_option(
         "--run-dir",
         f->doctor.host.run_dir,
         "Where runs are written (doctor checks its free space)")
      ->capture_default_str();
  cmd->add_option(
         "--lm-row",
         f->language_model_row,
         "Add one language-model row: gpt-nano on text:fortunes, CPU, fp32, batch 32")
      ->capture_default_str();
  add_no_color_flag(cmd, f->no_color);
  cmd->footer(
      "Exit code: 1 when doctor or the smoke ladder FAILs (the job stops there), else 0.");
  cmd->callback([f, &action] {
    action = [f] {
      const std::string& model = f->run.trainer.model.name;
      const std::string& data = f->run.data;
      f->matrix.steps = f->run.trainer.steps;
      const bool color = !f->no_color && stdout_wants_color();
      const BuildInfo info = build_info();
      fmt::print(
          "hotloop run ({} {}, LibTorch {})\n\n[1/3] doctor\n",
          info.hotloop_version,
          info.git_commit,
          info.libtorch_version);
      const env::Report report = env::diagnose(f->doctor);
      fmt::print("{}", env::to_text(report, color));
      if (env::exit_code(report) != 0) {
        fmt::print(
            "\nstopping: fix doctor's failures first (`hotloop doctor` shows them again)\n");
        return env::exit_code(report);
      }
      fmt::print("\n[2/3] smoke: {} on {}\n", model, data);
      std::fflush(stdout);
      testplan::SmokeOptions so;
      so.model = model;
      so.data = data;
      so.doctor = f->doctor;
      const testplan::SmokeReport smoke =
          testplan::run_smoke(so, [&](const testplan::Rung& r) {
            fmt::print("{}\n", testplan::to_text(r, color));
            std::fflush(stdout);
          });
      if (smoke.failed()) {
        fmt::print(
            "\nstopping: fix the smoke ladder's first failure (`hotloop smoke` runs it again)\n");
        return 1;
      }
      fmt::print("\n[3/3] ");
      f->matrix.rows = testplan::default_matrix(model, data);
      if (f->language_model_row) {
        // One language-model row: gpt-nano on the built-in text corpus.
        f->matrix.rows.push_back(
            {"cpu", "fp32", 32, "gpt-nano", "text:fortunes", false});
      }
      f->matrix.out_dir = f->out;
      run_and_report_matrix(f->matrix);
      return 0;
    };
  });
}

} // namespace hotloop::cli
