#pragma once
// MFU (model FLOPs utilization) = achieved model FLOP/s / the device's peak.
// The numerator's half: the model's training FLOPs per sample. Built-in
// models count them analytically (their training_flops_per_sample()); any
// other model is counted once at the start by LibTorch's profiler on one
// forward of a sample of zeros (eval mode, no gradients), times 3 for forward
// + backward, the same convention. The denominator's half: a GPU's dense
// peak FLOP/s for a precision, from NVIDIA's datasheets (tensor-core figures
// without structured sparsity; the datasheets' larger figures are 2:4-sparse).

#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "hotloop/model/model.h"
#include "hotloop/train/options.h"

namespace hotloop::train {

struct PeakFlops {
  double flops_per_s = 0;
  std::string source; // "H100 SXM / H200 bf16 dense 989 TFLOP/s (NVIDIA H100
                      // datasheet)"
};

// The peak for a GPU by its name (as CUDA reports it: "NVIDIA H200") under
// `precision` (fp32: the CUDA cores; tf32, bf16, fp16: the tensor cores);
// nullopt for a GPU not in the table.
std::optional<PeakFlops> peak_flops(
    const std::string& gpu_name,
    Precision precision);

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

// The peak of `device` (a GPU in peak_flops's table) for `precision`.
DevicePeak device_peak(const c10::Device& device, Precision precision);

} // namespace hotloop::train
