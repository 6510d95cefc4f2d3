#include "hotloop/env/doctor.h"

#include <unistd.h>

#include <algorithm>

#include "hotloop/env/doctor_checks.h"
#include "hotloop/env/own_process.h"

namespace hotloop::env {

DoctorFacts collect(const DoctorOptions& options) {
  DoctorFacts f;
  f.nvml = probe_nvml(options.nvml_library);
  f.torch = probe_torch(options.torch);
  f.host = probe_host(options.host);
  f.self_pid = options.self_pid != 0 ? options.self_pid
                                     : static_cast<unsigned int>(::getpid());
  f.host_pids = pids_are_the_hosts();
  return f;
}

Report evaluate(const DoctorFacts& facts, const DoctorThresholds& thresholds) {
  Report r;
  checks::framework_and_driver(facts, r.checks);
  checks::gpus(facts, thresholds, r.checks);
  checks::host(facts, thresholds, r.checks);

  const auto any = [&](Status s) {
    return std::any_of(r.checks.begin(), r.checks.end(), [s](const Check& c) {
      return c.status == s;
    });
  };
  const bool gpu =
      checks::nvml_sees_gpu(facts.nvml) || facts.torch.cuda.available;
  if (any(Status::Fail)) {
    r.verdict = Verdict::Fail;
  } else if (!gpu) {
    r.verdict = Verdict::CpuOnly;
  } else if (any(Status::Warn)) {
    r.verdict = Verdict::Warn;
  } else {
    r.verdict = Verdict::Pass;
  }
  return r;
}

Report diagnose(const DoctorOptions& options) {
  return evaluate(collect(options), options.thresholds);
}

int exit_code(const Report& report) {
  return report.verdict == Verdict::Fail ? 1 : 0;
}

const char* to_string(Status s) {
  switch (s) {
    case Status::Pass:
      return "PASS";
    case Status::Warn:
      return "WARN";
    case Status::Fail:
      return "FAIL";
    case Status::Skip:
      return "SKIP";
  }
  return "?";
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Pass:
      return "pass";
    case Verdict::Warn:
      return "warn";
    case Verdict::Fail:
      return "fail";
    case Verdict::CpuOnly:
      return "cpu-only";
  }
  return "?";
}

} // namespace hotloop::env
