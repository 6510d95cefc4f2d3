#pragma once
// Folds a watched job's samples (and the steps it reported) into the input
// of diagnose_job(): one window of the run, or the whole run.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hotloop/telemetry/job_diagnosis.h"
#include "hotloop/watch/job_sample.h"
#include "hotloop/watch/step_channel.h"

namespace hotloop::watch {

class WindowFold {
 public:
  void add(const JobSample& s);
  void add_steps(const std::vector<StepEvent>& steps);
  std::size_t samples() const {
    return samples_.size();
  }
  // The window so far; `memory_history` gets its job memory appended and is
  // passed on (the growth check looks across windows).
  telemetry::JobWindowInput input(
      std::vector<std::uint64_t>& memory_history) const;

 private:
  std::vector<JobSample> samples_;
  std::size_t steps_ = 0;
  double first_step_time_ = 0;
  double last_step_time_ = 0;
  int rank_ = -1; // the lowest rank that reported
};

} // namespace hotloop::watch
