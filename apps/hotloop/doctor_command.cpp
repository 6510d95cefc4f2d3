// `hotloop doctor`: is this machine ready to train on its GPU, and if not, what
// exactly to fix.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/env/doctor.h"

namespace hotloop::cli {

void add_doctor_command(CLI::App& app, Action& action) {
  struct Flags {
    bool json = false;
    bool no_color = false;
    bool no_kernel_probe = false;
    env::DoctorOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Verdicts on the driver, CUDA, LibTorch, each GPU and the host, with the fix for each problem");
  add_json_flag(
      cmd,
      flags->json,
      "one JSON object {\"verdict\", \"checks\"} instead of text");
  cmd->add_option(
      "--nvml-lib",
      flags->options.nvml_library,
      "NVML library to load (default: $HOTLOOP_NVML_LIB, else libnvidia-ml.so.1)");
  cmd->add_option(
      "--run-dir",
      flags->options.host.run_dir,
      "Where runs will be written; its free disk is checked");
  cmd->add_flag(
      "--no-kernel-probe",
      flags->no_kernel_probe,
      "Do not launch the small test kernel on each CUDA device (default: off)");
  add_no_color_flag(cmd, flags->no_color);
  cmd->footer(
      "Exit code: 0 when the verdict is pass, warn or cpu-only; 1 when a check FAILs.");
  cmd->callback([flags, &action] {
    action = [flags] {
      flags->options.torch.run_kernel_probe = !flags->no_kernel_probe;
      const env::Report report = env::diagnose(flags->options);
      if (flags->json) {
        fmt::print("{}\n", env::to_json(report).dump(2));
      } else {
        fmt::print(
            "{}",
            env::to_text(report, !flags->no_color && stdout_wants_color()));
      }
      return env::exit_code(report);
    };
  });
}

} // namespace hotloop::cli
