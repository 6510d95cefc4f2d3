#pragma once
// `hotloop audit`: the source documents' periodic performance audit (after
// a driver or library update, say). Reruns a baseline's matrix a few times,
// so that each row's run-to-run noise is known, and flags the rows whose
// throughput moved by more than that noise (and more than a floor).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/testplan/matrix.h"

namespace hotloop::testplan {

struct AuditOptions {
  int repeats = 3; // reruns per row: the noise is their spread
  // Changes are ratios, so the band is too: a row is flagged when its
  // median moved by more than a factor F = max(1 + min_change,
  // (max / min of the reruns) ^ noise_factor), up or down. (A band of
  // "2 x the spread" in percent would pass a 10x slowdown as noise once the
  // reruns spread by 50%; as a ratio it cannot.)
  double min_change = 0.05;
  double noise_factor = 2.0;
};

struct AuditRow {
  std::string id;
  std::string baseline_status;
  std::string status; // of the reruns: ok if every rerun was ok
  double baseline_images_per_s = 0;
  std::vector<double> images_per_s; // each rerun
  double median = 0;
  double change = 0; // median / baseline - 1
  double noise = 0; // max / min - 1 of the reruns
  double tolerance = 0; // F - 1: flagged below median/baseline = 1/F, above F
  std::string verdict; // "slower", "faster", "within noise", "status changed",
                       // "not comparable"
};

// The verdict for one row: a pure function, so that it is tested alone.
AuditRow audit_row(
    const RowResult& baseline,
    const std::vector<RowResult>& reruns,
    const AuditOptions& options);

nlohmann::json to_json(const AuditRow& r);
std::string audit_markdown(
    const std::vector<AuditRow>& rows,
    const std::string& baseline_path,
    const std::string& environment);
// Rows flagged "slower" or "status changed".
int regressions(const std::vector<AuditRow>& rows);

} // namespace hotloop::testplan
