#include "hotloop/model/conv2d.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/model/gemm_conv.h"

namespace hotloop::model {

CpuConv parse_cpu_conv(const std::string& text) {
  return parse_named<CpuConv>(kCpuConvNames, text, "cpu-conv");
}

const char* to_string(CpuConv mode) {
  return name_of<CpuConv>(kCpuConvNames, mode);
}

int set_cpu_conv(torch::nn::Module& module, CpuConv mode) {
  int n = 0;
  for (const auto& m : module.modules()) {
    if (auto* conv = dynamic_cast<Conv2dImpl*>(m.get())) {
      conv->set_cpu_conv(mode);
      ++n;
    }
  }
  return n;
}

bool Conv2dImpl::uses_gemm(const at::Tensor& input) const {
  if (cpu_conv_ == CpuConv::OneDnn) {
    return false;
  }
  const auto& o = options;
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  const bool eligible = input.dim() == 4 && input.device().is_cpu() &&
      input.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
      !at::autocast::is_autocast_enabled(at::kCPU) && o.groups() == 1 &&
      (*o.dilation())[0] == 1 && (*o.dilation())[1] == 1 &&
      padding != nullptr &&
      std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()) &&
      input.is_contiguous(at::MemoryFormat::ChannelsLast);
  if (!eligible || cpu_conv_ == CpuConv::Gemm) {
    return eligible;
  }
  const std::int64_t oh = conv_output_size(
      input.size(2), (*o.kernel_size())[0], (*o.stride())[0], (**padding)[0]);
  const std::int64_t ow = conv_output_size(
      input.size(3), (*o.kernel_size())[1], (*o.stride())[1], (**padding)[1]);
  return oh * ow <= kGemmMaxOutputPixels;
}

at::Tensor Conv2dImpl::forward(const at::Tensor& input) {
  if (!uses_gemm(input)) {
    return torch::nn::Conv2dImpl::forward(input);
  }
  const auto& padding = std::get<torch::ExpandingArray<2>>(options.padding());
  return gemm_conv2d(
      input,
      weight,
      bias,
      ConvGeometry{
          (*options.stride())[0],
          (*options.stride())[1],
          (*padding)[0],
          (*padding)[1]});
}

} // namespace hotloop::model
