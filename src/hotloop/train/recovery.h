#pragma once
// Out of memory in a step, recovered without changing the run's result: what
// a failed attempt may have changed (BatchNorm's running statistics, the
// generators dropout draws from) is saved at each step's start and put back;
// the memory report is written; the step is planned again with half the
// micro-batch and twice the accumulation (the same samples, the same
// effective batch). oom.h has the memory report and the size rule.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/model/weights.h"
#include "hotloop/train/run_state.h"

namespace hotloop::train {

class OomRecovery {
 public:
  // `enabled` false: no state is saved and an OOM stops the run (after its
  // report).
  explicit OomRecovery(bool enabled) : enabled_(enabled) {}

  bool enabled() const {
    return enabled_;
  }
  // At each step's start.
  void save(const RunState& s);

  struct Plan {
    std::int64_t micro_batch = 0;
    std::int64_t accum_steps = 0;
    std::string report_path; // "": none written (no run directory)
    std::string message; // for the log
  };
  // Step s.step + 1 ran out of memory (`error`): its gradients are dropped,
  // the saved state put back, the memory report written; returns the
  // smaller plan. Throws OutOfMemoryError (with the report and the fix) when
  // the micro-batch cannot shrink or recovery is off.
  Plan shrink(const RunState& s, const std::string& error);

  std::int64_t recoveries() const {
    return recoveries_;
  }
  // A resumed run counts the earlier part's recoveries too.
  void set_recoveries(std::int64_t n) {
    recoveries_ = n;
  }

 private:
  bool enabled_;
  std::int64_t recoveries_ = 0;
  std::vector<at::Tensor> buffers_;
  std::vector<at::Tensor> saved_buffers_;
  model::StateDict saved_rng_;
};

} // namespace hotloop::train
