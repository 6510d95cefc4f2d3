#pragma once
// What `hotloop bench` writes: results.json (every figure, the row series
// and the environment fingerprint), report.md (the comparison table, as in
// the source documents, plus the environment) and report.html
// (self-contained: inline SVG charts, no script, no network).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/testplan/matrix.h"

namespace hotloop::testplan {

struct BenchReport {
  nlohmann::json environment; // environment_fingerprint()
  std::int64_t steps = 0; // per row, as asked
  double cpu_row_seconds = 0;
  std::int64_t eval_samples = 0;
  std::vector<RowResult> rows;
};

nlohmann::json to_json(const BenchReport& report);
// Reads a results.json; throws DataError naming the file and what is wrong.
BenchReport read_results(const std::string& path);

std::string report_markdown(const BenchReport& report);
std::string report_html(const BenchReport& report);
// The fastest row that ran, in one line ("" when none ran).
std::string headline(const BenchReport& report);

// Writes results.json, report.md and report.html into `dir` (created).
void write_report(const std::string& dir, const BenchReport& report);

} // namespace hotloop::testplan
