#pragma once
// `hotloop watch`: follows a job (started here, or attached by pid) until it
// ends, sampling it every interval, diagnosing every window, and writing
// telemetry.jsonl, TensorBoard events, a live status line, optional
// Prometheus text, and at the end summary.json and report.html.

#include <optional>
#include <string>
#include <vector>

#include "hotloop/telemetry/diagnosis.h"

namespace hotloop::watch {

struct WatchOptions {
  std::vector<std::string> command; // start this job...
  int pid = 0; // ...or follow this running one
  std::string out_dir; // the run folder (created)
  double interval_s = 1.0;
  double window_s = 10.0; // seconds per diagnosed window
  double grace_s = 10.0; // after passing on SIGINT/SIGTERM, then SIGKILL
  int metrics_port = 0; // Prometheus on 127.0.0.1:PORT; 0: off
  bool tensorboard = true;
  bool live = true; // the status line on a terminal (standard error)
  std::string nvml_library; // "": $HOTLOOP_NVML_LIB or libnvidia-ml.so.1
};

struct WatchResult {
  // What watch exits with: the job's exit code; 0 for an attached job (its
  // code is its parent's to read).
  int exit_code = 0;
  std::string run_dir;
  telemetry::Diagnosis diagnosis;
};

// Throws UsageError for bad options, a command that does not exist or a pid
// that cannot be followed (nothing is started or written then).
WatchResult watch(const WatchOptions& options);

} // namespace hotloop::watch
