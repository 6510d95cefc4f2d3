// `hotloop run`: the main job. Today it proves the foundation (doctor) and says
// which stages of the test plan (smoke, bench, report) are not built yet; they
// join here as they land.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/build_info.h"
#include "hotloop/env/doctor.h"

namespace hotloop::cli {

void add_run_command(CLI::App& app, Action& action) {
  struct Flags {
    bool no_color = false;
    env::DoctorOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "The main job: doctor, then the test plan (smoke ladder, bench matrix, report) on the built-in data");
  cmd->add_option(
      "--run-dir", flags->options.host.run_dir, "Where runs are written");
  cmd->add_flag(
      "--no-color",
      flags->no_color,
      "Plain text even on a terminal (default: off)");
  cmd->footer("Exit code: doctor's (1 when a check FAILs), else 0.");
  cmd->callback([flags, &action] {
    action = [flags] {
      const BuildInfo info = build_info();
      fmt::print(
          "hotloop run ({} {}, LibTorch {})\n\n[1/4] doctor\n",
          info.hotloop_version,
          info.git_commit,
          info.libtorch_version);
      const env::Report report = env::diagnose(flags->options);
      fmt::print(
          "{}", env::to_text(report, !flags->no_color && stdout_wants_color()));
      const int rc = env::exit_code(report);
      if (rc != 0) {
        fmt::print(
            "\nstopping: fix doctor's failures first (`hotloop doctor` shows them again)\n");
        return rc;
      }
      fmt::print(
          "\n[2/4] smoke: not built yet (one batch on CPU, one on CUDA, then scale)\n"
          "[3/4] bench: not built yet (the test plan's matrix of short training runs)\n"
          "[4/4] report: not built yet (report.md and report.html)\n"
          "\nhotloop run: doctor done; the remaining stages arrive with the smoke/bench work\n");
      return 0;
    };
  });
}

} // namespace hotloop::cli
