#pragma once
// Out of memory in a step, recovered without changing the run's result: what
// a failed attempt may have changed (BatchNorm's running statistics, the
// generators dropout draws from) is saved at each step's start and put back;
// the memory report (what the device held) is written; the step is planned
// again with half the micro-batch and twice the accumulation (the same
// samples, the same effective batch). fault_injection.h raises the real
// c10::OutOfMemoryError for tests without a GPU.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "hotloop/model/weights.h"
#include "hotloop/train/run_state.h"

namespace hotloop::train {

// The largest micro-batch of at most half of `micro` that divides
// `per_rank_batch` (so that micro x accumulation stays the batch): micro / 2
// when micro is even. 0 when micro is already 1.
std::int64_t smaller_micro_batch(
    std::int64_t per_rank_batch,
    std::int64_t micro);

// What the device holds now: the caching allocator's allocated and reserved
// memory (current and peak), its largest free cached block and segment count,
// the driver's free and total memory, the other processes on the GPU (NVML),
// and this process's resident memory. On the CPU, only the last.
nlohmann::json memory_report(const c10::Device& device);

// One line for a log or an error message: "allocated 10.2 GiB, reserved 12.0
// GiB (peak 13.1 GiB) of 139.8 GiB; other processes: 1 (python, 3.0 GiB)".
std::string describe_memory(const nlohmann::json& report);

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
