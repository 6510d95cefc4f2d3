#include "hotloop/train/model_flops.h"

#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/telemetry/op_flops.h"
#include "hotloop/train/peak_flops.h"

namespace hotloop::train {

ModelFlops training_flops(model::Model& model, const model::ModelOptions& o) {
  if (const double f = model.training_flops_per_sample(); f > 0) {
    return {f, "analytic"};
  }
  const std::int64_t tokens = model.tokens_per_sample();
  const at::Tensor sample = tokens > 0
      ? at::zeros({1, tokens}, at::kLong)
      : at::zeros({1, o.in_channels, o.image_size, o.image_size});
  const bool was_training = model.is_training();
  model.eval();
  ModelFlops r;
  try {
    torch::NoGradGuard no_grad;
    const double forward =
        telemetry::counted_flops([&] { (void)model.forward(sample); });
    r = forward > 0
        ? ModelFlops{3 * forward, "counted"}
        : ModelFlops{0, "its forward runs no matrix product or convolution"};
  } catch (const std::exception& e) {
    r = {0, fmt::format("a profiled forward failed: {}", e.what())};
  }
  model.train(was_training);
  return r;
}

DevicePeak device_peak(const c10::Device& device, Precision precision) {
  if (!device.is_cuda()) {
    return {};
  }
  for (const cuda::Device& d : cuda::state().devices) {
    if (d.index == device.index()) {
      if (const auto peak = peak_flops(d.name, precision)) {
        return {peak->flops_per_s, peak->source};
      }
    }
  }
  return {};
}

} // namespace hotloop::train
