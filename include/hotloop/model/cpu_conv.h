#pragma once
// --cpu-conv: which algorithm hotloop's convolution layers use on the CPU.
// (CUDA, other dtypes and autocast always take LibTorch's convolution.)

#include <cstdint>
#include <string>

#include <torch/nn/module.h>

#include "hotloop/core/named.h"

namespace hotloop::model {

enum class CpuConv {
  // im2col + GEMM where the output map is small (at most kGemmMaxOutputPixels
  // pixels: oneDNN's direct kernels are slow there), oneDNN elsewhere.
  Auto,
  OneDnn, // LibTorch's convolution (oneDNN) everywhere
  Gemm, // im2col + GEMM for every eligible layer
};
inline constexpr Named<CpuConv> kCpuConvNames[] = {
    {CpuConv::Auto, "auto"},
    {CpuConv::OneDnn, "onednn"},
    {CpuConv::Gemm, "gemm"}};
CpuConv parse_cpu_conv(const std::string& text);
const char* to_string(CpuConv mode);

// Auto's threshold: output maps of at most 4x4 pixels. Measured on a 2-core
// Ice Lake (bench/results/cpu-conv-2026-11-30-cpu2.json): GEMM is faster
// on 4x4 maps, the two are about even on 7x7, and oneDNN is far faster on
// larger ones.
inline constexpr std::int64_t kGemmMaxOutputPixels = 16;

// Sets the algorithm of every hotloop convolution layer in `module` (the
// built-in models'); returns how many layers there were.
int set_cpu_conv(torch::nn::Module& module, CpuConv mode);

} // namespace hotloop::model
