#pragma once
// What MFU is computed from: the model's training FLOPs per sample and the
// device's peak. Built-in models count their FLOPs analytically (their
// training_flops_per_sample()); any other model is counted once at the start
// by LibTorch's profiler on one forward of a sample of zeros (eval mode, no
// gradients), times 3 for forward + backward, the same convention.

#include <string>

#include <c10/core/Device.h>

#include "hotloop/model/model.h"
#include "hotloop/train/options.h"

namespace hotloop::train {

struct ModelFlops {
  double per_sample = 0; // training (forward + backward); 0: unknown
  std::string source; // "analytic", "counted", or why it is unknown
};

// `model` on the CPU, shaped by `o` (in_channels and image_size, or the
// context of a language model).
ModelFlops training_flops(model::Model& model, const model::ModelOptions& o);

struct DevicePeak {
  double flops_per_s = 0; // one device's dense peak; 0: not in the table
  std::string source;
};

// The peak of `device` (a GPU in peak_flops' table) for `precision`.
DevicePeak device_peak(const c10::Device& device, Precision precision);

} // namespace hotloop::train
