#pragma once
// The generators a training step draws from (dropout, augmentation on the
// device): the CPU's default generator and, on a GPU, that device's. Saved
// in checkpoints and before each step (OOM recovery) so that a redone or
// resumed step draws the same numbers.

#include <c10/core/Device.h>

#include "hotloop/model/weights.h"

namespace hotloop::train {

// {"cpu": its state} and, on a CUDA device, {"cuda": that device's}.
model::StateDict rng_state(const c10::Device& device);
// Puts back what rng_state() returned (a "cuda" entry only on CUDA).
void set_rng_state(const model::StateDict& state, const c10::Device& device);

} // namespace hotloop::train
