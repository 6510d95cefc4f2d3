#pragma once
// What a run's summary takes from the process and from the run's state, the
// same for the Trainer (trainer_lifecycle.cpp) and for a loop hotloop does not
// drive (loop_run.cpp).

#include <cstdint>

#include "hotloop/train/run_state.h"
#include "hotloop/train/summary.h"

namespace hotloop::train {

// The process's peak resident memory (any device).
std::uint64_t peak_rss_bytes();

// tokens/s, model FLOP/s and MFU, from sum.images_per_s and the state's model
// (tokens per sample), FLOPs per sample and peak.
void fill_model_flops(TrainSummary& sum, const RunState& s);

} // namespace hotloop::train
