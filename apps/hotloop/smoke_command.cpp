// `hotloop smoke`: the ladder (testplan/smoke.h), a line per rung as it ends.

#include <cstdlib>

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/testplan/smoke.h"
#include "run_option_flags.h"

namespace hotloop::cli {

void add_smoke_command(CLI::App& app, Action& action) {
  struct Flags {
    testplan::SmokeOptions options;
    train::RunOptions run; // --model --data --batch --seed --device
    bool json = false;
    bool no_color = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "smoke",
      "One batch on the CPU, the same on CUDA, then scale: a ladder that stops at the first failure and says what to fix");
  auto& o = f->options;
  // `hotloop train`'s flags, with the ladder's defaults.
  f->run.trainer.model.name = o.model;
  f->run.data = o.data;
  f->run.trainer.batch = o.batch;
  f->run.trainer.seed = o.seed;
  f->run.trainer.device = o.device;
  add_run_flags(cmd, f->run, {"model", "data", "batch", "seed", "device"});
  cmd->add_option(
         "--overfit-steps",
         o.overfit_steps,
         "Steps on one batch; the loss must fall 10x")
      ->capture_default_str();
  add_json_flag(cmd, f->json);
  add_no_color_flag(cmd, f->no_color);
  cmd->footer(
      "Rungs: gpu, cpu-step, cuda-step, on-gpu, cpu-vs-gpu, overfit, mixed-precision.\n"
      "Without a GPU the GPU rungs are SKIP; overfit and mixed-precision (bf16) run on the CPU.\n"
      "Exit code: 1 when a rung FAILs (the rest are not run), else 0.");
  cmd->callback([f, &action] {
    action = [f] {
      const train::RunOptions& run = f->run;
      if (run.batch_auto) {
        throw UsageError(
            "--batch auto: the ladder trains one batch of a given size",
            "give --batch N (N of at least 2)");
      }
      f->options.model = run.trainer.model.name;
      f->options.data = run.data;
      f->options.batch = run.trainer.batch;
      f->options.seed = run.trainer.seed;
      f->options.device = run.trainer.device;
      if (const char* inject = std::getenv("HOTLOOP_SMOKE_INJECT")) {
        f->options.inject_failure = inject;
      }
      const bool color = !f->no_color && !f->json && stdout_wants_color();
      if (!f->json) {
        fmt::print(
            "hotloop smoke: {} on {} (batch {})\n",
            f->options.model,
            f->options.data,
            f->options.batch);
      }
      const testplan::SmokeReport r =
          testplan::run_smoke(f->options, [&](const testplan::Rung& rung) {
            if (!f->json) {
              fmt::print("{}\n", testplan::to_text(rung, color));
              std::fflush(stdout);
            }
          });
      if (f->json) {
        fmt::print("{}\n", testplan::to_json(r).dump(2));
      } else {
        fmt::print(
            "{}\n",
            r.failed()
                ? "smoke: FAILED (fix the first failure, then run it again)"
                : "smoke: passed");
      }
      return testplan::exit_code(r);
    };
  });
}

} // namespace hotloop::cli
