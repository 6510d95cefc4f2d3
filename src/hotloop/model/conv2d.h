#pragma once
// The models' Conv2d: LibTorch's (same parameters and names, so torchvision
// weights load as before) whose forward on the CPU can take im2col + GEMM
// (gemm_conv.h) instead of oneDNN, as --cpu-conv says (cpu_conv.h).

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/conv.h>

#include "hotloop/model/cpu_conv.h"

namespace hotloop::model {

class Conv2dImpl : public torch::nn::Conv2dImpl {
 public:
  using torch::nn::Conv2dImpl::Conv2dImpl;
  // Hides the base's (non-virtual) forward; the models call this one.
  at::Tensor forward(const at::Tensor& input);
  void set_cpu_conv(CpuConv mode) {
    cpu_conv_ = mode;
  }
  // Whether forward(input) takes im2col + GEMM.
  bool uses_gemm(const at::Tensor& input) const;

 private:
  CpuConv cpu_conv_ = CpuConv::Auto;
};

class Conv2d : public torch::nn::ModuleHolder<Conv2dImpl> {
 public:
  using torch::nn::ModuleHolder<Conv2dImpl>::ModuleHolder;
};

} // namespace hotloop::model
