#include "hotloop/testplan/audit.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace hotloop::testplan {

AuditRow audit_row(
    const RowResult& baseline,
    const std::vector<RowResult>& reruns,
    const AuditOptions& options) {
  AuditRow a;
  a.id = baseline.row.id();
  a.baseline_status = baseline.status;
  a.baseline_images_per_s = baseline.images_per_s;
  a.status = "ok";
  for (const auto& r : reruns) {
    if (r.status != "ok") {
      a.status = r.status;
    } else {
      a.images_per_s.push_back(r.images_per_s);
    }
  }
  if (reruns.empty()) {
    a.status = "not run";
  }
  if (a.status != baseline.status) {
    a.verdict = "status changed";
    return a;
  }
  if (a.status != "ok" || a.images_per_s.empty() ||
      !(a.baseline_images_per_s > 0)) {
    a.verdict = "not comparable";
    return a;
  }
  std::vector<double> v = a.images_per_s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  a.median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  a.noise = v.front() > 0 ? v.back() / v.front() - 1 : 0;
  a.change = a.median / a.baseline_images_per_s - 1;
  const double band = std::max(
      1 + options.min_change, std::pow(1 + a.noise, options.noise_factor));
  a.tolerance = band - 1;
  const double ratio = 1 + a.change;
  if (ratio < 1 / band) {
    a.verdict = "slower";
  } else if (ratio > band) {
    a.verdict = "faster";
  } else {
    a.verdict = "within noise";
  }
  return a;
}

nlohmann::json to_json(const AuditRow& r) {
  return {
      {"id", r.id},
      {"baseline_status", r.baseline_status},
      {"status", r.status},
      {"baseline_images_per_s", r.baseline_images_per_s},
      {"images_per_s", r.images_per_s},
      {"median", r.median},
      {"change", r.change},
      {"noise", r.noise},
      {"tolerance", r.tolerance},
      {"verdict", r.verdict}};
}

std::string audit_markdown(
    const std::vector<AuditRow>& rows,
    const std::string& baseline_path,
    const std::string& environment) {
  std::ostringstream o;
  o << "# hotloop audit\n\nBaseline: `" << baseline_path
    << "`\n\nNow: " << environment
    << "\n\n| row | baseline img/s | now img/s (median) | change | noise (max/min) | flagged beyond | verdict |\n"
       "|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    if (r.verdict == "status changed" || r.verdict == "not comparable") {
      o << fmt::format(
          "| {} | {} | {} | - | - | - | **{}** |\n",
          r.id,
          r.baseline_status == "ok"
              ? fmt::format("{:.0f}", r.baseline_images_per_s)
              : r.baseline_status,
          r.status,
          r.verdict);
      continue;
    }
    const bool flag = r.verdict != "within noise";
    o << fmt::format(
        "| {} | {:.0f} | {:.0f} | {:+.1f}% | {:.2f}x | {:+.1f}% / {:+.1f}% | {}{}{} |\n",
        r.id,
        r.baseline_images_per_s,
        r.median,
        100 * r.change,
        1 + r.noise,
        100 * (1 / (1 + r.tolerance) - 1),
        100 * r.tolerance,
        flag ? "**" : "",
        r.verdict,
        flag ? "**" : "");
  }
  o << fmt::format("\n{} row(s) regressed.\n", regressions(rows));
  return o.str();
}

int regressions(const std::vector<AuditRow>& rows) {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [](const AuditRow& r) {
        return r.verdict == "slower" || r.verdict == "status changed";
      }));
}

} // namespace hotloop::testplan
