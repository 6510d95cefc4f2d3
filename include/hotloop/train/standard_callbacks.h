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

struct CallbackOptions {
  ConsoleOptions console;
  TelemetryOptions telemetry;
  bool metrics_file = true;
  bool tensorboard = true;
  int metrics_port = 0; // Prometheus; 0: off

  // Throws UsageError naming the option for values out of range.
  void validate() const;
};

Callbacks standard_callbacks(const CallbackOptions& options = {});

} // namespace hotloop::train
