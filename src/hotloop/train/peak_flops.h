#pragma once
// A GPU's dense peak FLOP/s for a precision, from NVIDIA's datasheets: the
// denominator of MFU (model FLOPs utilization). Tensor-core figures without
// structured sparsity (the datasheets' larger figures are 2:4-sparse).

#include <optional>
#include <string>

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

} // namespace hotloop::train
