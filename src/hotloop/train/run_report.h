#pragma once
// report.html of a training run: the summary's figures, the last diagnosis
// with its fixes, the verdict of each window, and charts of the step time,
// the data wait, the loss and the throughput per step. Built from the run
// folder's summary.json and metrics.jsonl alone (so `hotloop train` and
// hotloop.Run write the same page), self-contained (inline SVG, no script).

#include <string>

namespace hotloop::train {

// Writes RUN/report.html from RUN/summary.json and RUN/metrics.jsonl (a
// missing metrics file gives a report without charts). Throws Error when
// summary.json is missing or not JSON.
void write_run_report(const std::string& run_dir);

// The page itself, for tests.
std::string run_report_html(const std::string& run_dir);

} // namespace hotloop::train
