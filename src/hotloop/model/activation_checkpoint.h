#pragma once
// Activation checkpointing in C++ (LibTorch has no torch.utils.checkpoint):
// a segment's forward runs without keeping its activations, and backward runs
// it again, with gradients, to get them. Memory for the segment's
// intermediate activations is traded for one more forward.
//
// Limits, the same as PyTorch's reentrant checkpoint: BatchNorm layers in the
// segment update their running statistics twice per step (once per forward),
// and random ops in the segment (dropout) would draw new numbers in the
// recompute; hotloop's ResNets have no dropout.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace hotloop::model {

// What a segment reads besides its input and its parameters (a language
// model's block: the rotations at the tokens' positions, the packed rows'
// attention plan), kept with the input for the recompute: tensors that take
// no gradient (undefined ones allowed), and integers.
struct SegmentSide {
  std::vector<at::Tensor> tensors;
  std::vector<std::int64_t> ints;
};

// A segment: any module with `at::Tensor forward(at::Tensor)`, called through
// this function pointer so the autograd node can call it again in backward;
// the second form also takes the segment's side inputs.
using SegmentForward =
    at::Tensor (*)(torch::nn::Module& segment, const at::Tensor& input);
using SegmentForwardWithSide = at::Tensor (*)(
    torch::nn::Module& segment,
    const at::Tensor& input,
    const SegmentSide& side);

// segment(input), recomputed in backward. `segment` must outlive the backward
// pass (it is part of the model). Autocast's state at the call is restored for
// the recompute.
at::Tensor checkpoint(
    torch::nn::Module& segment,
    SegmentForward forward,
    const at::Tensor& input);
// segment(input, side), the same way.
at::Tensor checkpoint(
    torch::nn::Module& segment,
    SegmentForwardWithSide forward,
    const at::Tensor& input,
    const SegmentSide& side);

} // namespace hotloop::model
