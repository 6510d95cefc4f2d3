// doctor's report as JSON and as text for people.
#include <algorithm>

#include <fmt/format.h>

#include "hotloop/env/doctor.h"

namespace hotloop::env {
namespace {

const char* color_of(Status s) {
  switch (s) {
    case Status::Pass:
      return "\033[32m";
    case Status::Warn:
      return "\033[33m";
    case Status::Fail:
      return "\033[31m";
    case Status::Skip:
      return "\033[2m";
  }
  return "";
}

std::string verdict_line(const Report& r) {
  const auto count = [&](Status s) {
    return std::count_if(r.checks.begin(), r.checks.end(), [s](const Check& c) {
      return c.status == s;
    });
  };
  const auto fails = count(Status::Fail);
  const auto warns = count(Status::Warn);
  switch (r.verdict) {
    case Verdict::Pass:
      return "verdict: PASS: ready to train on the GPU";
    case Verdict::Warn:
      return fmt::format(
          "verdict: WARN: ready to train on the GPU; {} warning(s) above can cost speed",
          warns);
    case Verdict::Fail:
      return fmt::format(
          "verdict: FAIL: not ready; fix the {} failure(s) above first", fails);
    case Verdict::CpuOnly:
      return fmt::format(
          "verdict: CPU-ONLY: no usable NVIDIA GPU; hotloop will train on the CPU{}",
          warns > 0 ? fmt::format(" ({} warning(s) above)", warns)
                    : std::string());
  }
  return {};
}

} // namespace

nlohmann::json to_json(const Report& report) {
  auto checks = nlohmann::json::array();
  for (const auto& c : report.checks) {
    nlohmann::json j = {
        {"id", c.id},
        {"status", to_string(c.status)},
        {"summary", c.summary},
        {"facts", c.facts}};
    if (!c.fix.empty()) {
      j["fix"] = c.fix;
    }
    checks.push_back(std::move(j));
  }
  return {
      {"verdict", to_string(report.verdict)}, {"checks", std::move(checks)}};
}

std::string to_text(const Report& report, bool color) {
  std::size_t id_width = 0;
  for (const auto& c : report.checks) {
    id_width = std::max(id_width, c.id.size());
  }
  const char* reset = color ? "\033[0m" : "";
  std::string out;
  for (const auto& c : report.checks) {
    out += fmt::format(
        "{}{}{}  {:<{}}  {}\n",
        color ? color_of(c.status) : "",
        to_string(c.status),
        reset,
        c.id,
        id_width,
        c.summary);
    if (!c.fix.empty()) {
      out += fmt::format("      {:<{}}  fix: {}\n", "", id_width, c.fix);
    }
  }
  out += verdict_line(report) + "\n";
  return out;
}

} // namespace hotloop::env
