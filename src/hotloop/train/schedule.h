#pragma once
// Learning-rate schedules as pure functions of the optimizer step: a resumed
// run needs only the step count to be back on its curve.

#include <cstdint>
#include <string>

#include "hotloop/train/options.h"

namespace hotloop::train {

// The learning rate for optimizer step `step` (0-based) of `total_steps`.
double learning_rate(
    const ScheduleOptions& options,
    std::int64_t step,
    std::int64_t total_steps);

// The step at which the schedule's warm-up ends: --warmup-steps, or
// one-cycle's rise (pct_start of the steps).
std::int64_t warmup_end(
    const ScheduleOptions& options,
    std::int64_t total_steps);

} // namespace hotloop::train
