#pragma once
// A 2-D convolution on the CPU as one matrix product (im2col + GEMM), with
// its own backward: the algorithm `--cpu-conv` picks for the layers where
// oneDNN's direct convolution is slow.
//
// Why: oneDNN's direct kernels block over the output's width, so with a
// few output pixels per row most of each register block is wasted. On the
// development machine (2 Ice Lake cores, AVX-512, fp32, batch 64), the
// GEMM path runs layer4's 4x4 convolutions of resnet18-small 1.2-1.6x as fast
// (forward + backward); on 7x7 maps the two are about even, and on larger
// ones oneDNN is far faster (bench/results/cpu-conv-2026-11-30-cpu2.json,
// `hotloop bench conv`).
//
// The layout is NHWC (channels_last): a row of the column matrix is one
// output pixel's receptive field, kernel row by kernel column by channel, so
// im2col copies whole channel vectors and the weight is a free view of a
// channels_last [O, KH, KW, C] tensor.
//   forward:        col = im2col(x)                      [N*OH*OW, KH*KW*C]
//                   y   = col @ W^T (+ bias)             [N*OH*OW, O]
//   backward input: dx  = col2im(dy @ W)                 (sums the overlaps)
//   backward weight dW  = dy^T @ im2col(x)               (recomputed: the
//                   column matrix is 9x the input, so it is not kept)
// Zero padding, groups 1, dilation 1, fp32.

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace hotloop::model {

struct ConvGeometry {
  std::int64_t stride_h = 1;
  std::int64_t stride_w = 1;
  std::int64_t pad_h = 0;
  std::int64_t pad_w = 0;
};

// The convolution of `input` (N, C, H, W; any layout, fp32, CPU) with
// `weight` (O, C, KH, KW) and an optional `bias` (O) through im2col + GEMM.
// The result is channels_last; autograd differentiates input, weight and
// bias.
at::Tensor gemm_conv2d(
    const at::Tensor& input,
    const at::Tensor& weight,
    const at::Tensor& bias,
    const ConvGeometry& geometry);

// A convolution's output length along one axis (zero padding, dilation 1).
inline std::int64_t conv_output_size(
    std::int64_t input,
    std::int64_t kernel,
    std::int64_t stride,
    std::int64_t pad) {
  return (input + 2 * pad - kernel) / stride + 1;
}

// The column matrix of an NHWC-contiguous input (exposed for the tests).
at::Tensor im2col_nhwc(
    const at::Tensor& input_nhwc,
    std::int64_t kernel_h,
    std::int64_t kernel_w,
    const ConvGeometry& geometry);

} // namespace hotloop::model
