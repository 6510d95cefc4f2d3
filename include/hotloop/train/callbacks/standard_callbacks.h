#pragma once
// The callbacks `hotloop train` runs with, as one list a caller can take
// whole, change, or add its own to (Trainer takes this list by default):
//   console     the trainer's log lines, a progress bar on a terminal or a
//               line every log_every_s seconds (rank 0)
//   telemetry   the NVML/host sampler (telemetry.jsonl), step phases, and a
//               diagnosis every diagnosis_window steps
//   metrics     metrics.jsonl: a line per step, per evaluation, per
//               diagnosis window and per OOM recovery (rank 0)
//   tensorboard TensorBoard event files in the run directory (rank 0)
//   prometheus  metrics on 127.0.0.1:metrics_port (rank 0; 0: off)
//   profile     with --profile: Chrome traces of chosen steps (RUN/profile/)
// A data-parallel rank's status is added by the Trainer itself.

#include <cstdint>
#include <functional>
#include <string>

#include "hotloop/train/callback.h"

namespace hotloop::train {

struct ConsoleOptions {
  bool enabled = true;
  bool progress_bar = false; // one updating line (on a terminal)
  double log_every_s = 10; // plain progress lines otherwise; 0: none
};

struct TelemetryOptions {
  bool enabled = true;
  double interval_s = 1.0; // sampler period
  std::int64_t diagnosis_window = 50; // steps per diagnosis
  std::string nvml_library; // "": the default
};

// --profile: LibTorch's profiler over chosen steps, as Chrome traces in
// RUN/profile/ (train/callbacks/profile_callback.h says how "auto" chooses).
struct ProfileOptions {
  std::string steps; // "" off, "A-B", "N" or "auto"
  std::int64_t auto_steps = 3; // steps an automatic recording takes
  double slow_factor = 3; // a step this many times the median is slow
  std::int64_t warmup_steps = 10; // never judged slow, nor recorded by auto
  double auto_every_s = 600; // at most one automatic recording per this
  std::uint64_t max_total_bytes = 1ull << 30; // traces of one run, in all
  // Throws UsageError for a malformed `steps`.
  void validate() const;
};

struct CallbackOptions {
  ConsoleOptions console;
  TelemetryOptions telemetry;
  bool metrics_file = true;
  bool tensorboard = true;
  int metrics_port = 0; // Prometheus; 0: off
  ProfileOptions profile; // steps "": off

  // Throws UsageError naming the option for values out of range.
  void validate() const;
};

Callbacks standard_callbacks(const CallbackOptions& options = {});

} // namespace hotloop::train
