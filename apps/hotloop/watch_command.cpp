// `hotloop watch -- CMD ARGS...` / `hotloop watch --pid PID`: the telemetry,
// diagnosis and report of a training run for any job, a Python script
// included.

#include "cli_common.h"
#include "hotloop/watch/watcher.h"

namespace hotloop::cli {

void add_watch_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<watch::WatchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "watch",
      "Run a training command (or follow a running one) and say what holds it back: GPU share, CPU per process, a verdict per window, report.html");
  cmd->add_option(
      "--pid",
      o->pid,
      "Follow this running process instead of starting a command");
  cmd->add_option(
      "--out", o->out_dir, "Run folder; empty: runs/watch-DATE-TIME");
  cmd->add_option("--interval", o->interval_s, "Seconds between samples");
  cmd->add_option("--window", o->window_s, "Seconds per diagnosed window");
  cmd->add_option(
      "--grace",
      o->grace_s,
      "Seconds a job has to end after SIGINT/SIGTERM before watch sends SIGKILL");
  cmd->add_option(
      "--metrics-port",
      o->metrics_port,
      "Serve Prometheus metrics on 127.0.0.1:PORT; 0: off");
  cmd->add_option(
      "--tensorboard",
      o->tensorboard,
      "Write TensorBoard event files into RUN/tensorboard");
  cmd->add_option(
      "--live",
      o->live,
      "Redraw a status line every sample on a terminal (else a line when the verdict changes)");
  cmd->add_option(
      "--nvml-lib",
      o->nvml_library,
      "The NVML library; empty: $HOTLOOP_NVML_LIB or libnvidia-ml.so.1");
  cmd->add_option(
      "command",
      o->command,
      "The job: everything after -- (needed once the job has flags of its own)");
  cmd->footer(
      "Examples:\n"
      "  hotloop watch -- python train.py --epochs 3    # start it, watch it, report\n"
      "  hotloop watch --interval 0.5 -- ./train.sh      # watch's flags before --, the job's after\n"
      "  hotloop watch --pid 12345                      # follow a running job\n"
      "  hotloop watch --metrics-port 9400 -- torchrun --nproc-per-node 8 train.py\n"
      "Steps: the job gets $HOTLOOP_WATCH_STEPS, a FIFO; one line per step\n"
      "(`step=12 loss=0.53` or JSON) adds steps/s and loss (python/hotloop_watch.py).\n"
      "A job followed by --pid finds the FIFO at /tmp/hotloop-watch-UID/PID (the helper\n"
      "looks there by itself).\n"
      "SIGINT/SIGTERM are passed on to a started job (SIGKILL after --grace); the\n"
      "report is still written. With --pid, a signal stops watching only.\n"
      "Exit code: the job's (128+N when signal N ended it); with --pid 0;\n"
      "2 for bad usage, a command that does not exist, or a pid that cannot be read.");
  cmd->callback(
      [o, &action] { action = [o] { return watch::watch(*o).exit_code; }; });
}

} // namespace hotloop::cli
