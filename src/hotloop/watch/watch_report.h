#pragma once
// What `hotloop watch` leaves in its run folder at the end: summary.json
// (the verdict, the job's exit code, what watching cost) and report.html
// (self-contained: timelines as inline SVG, the verdict of every window), and
// the Prometheus text it serves while the job runs.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/watch/job_sample.h"

namespace hotloop::watch {

struct StepPoint {
  double elapsed_s = 0;
  std::int64_t step = 0;
  std::optional<double> loss;
};

struct WindowVerdict {
  double from_s = 0;
  double to_s = 0;
  telemetry::Diagnosis diagnosis;
};

struct WatchRecord {
  std::string command; // as a shell would show it
  int pid = 0;
  bool started_by_watch = true;
  std::optional<int> exit_code; // none: attached, or still running
  std::string ended; // "exited", "killed after the grace period", ...
  double start_unix = 0;
  double wall_s = 0;
  double interval_s = 1;
  std::vector<JobSample> samples;
  std::vector<StepPoint> steps; // the lowest rank's
  std::size_t bad_step_lines = 0;
  std::string first_bad_step_line;
  std::vector<WindowVerdict> windows;
  telemetry::Diagnosis run; // the whole run
  double watch_cpu_s = 0; // watch's own CPU time
  std::vector<std::string> notes; // signals passed on, escalations
  std::string run_dir;
  bool tensorboard = true; // event files were written
};

nlohmann::json summary_json(const WatchRecord& r);
std::string report_html(const WatchRecord& r);
// A sample as TensorBoard scalars (watch/gpuN/*, watch/job/*, watch/host/*,
// watch/steps/*).
std::vector<std::pair<std::string, double>> tensorboard_values(
    const JobSample& s,
    double steps_per_s,
    std::optional<double> loss);
// The live status line: time, each GPU's use and the job's share, memory,
// the CPU of the main process and the rest, steps/s, the latest verdict.
std::string status_line(
    const JobSample& s,
    double steps_per_s,
    const std::string& verdict);
std::string prometheus_text(
    const JobSample& s,
    const std::optional<telemetry::Diagnosis>& d,
    double steps_per_s,
    std::optional<double> loss);

} // namespace hotloop::watch
