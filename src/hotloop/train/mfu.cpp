#include "hotloop/train/mfu.h"

#include <vector>

#include <ATen/ops/zeros.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/telemetry/op_flops.h"

namespace hotloop::train {

namespace {

struct Row {
  const char* match; // a part of the CUDA device name; the first match wins
  const char* label;
  double fp32; // TFLOP/s, dense
  double tf32;
  double bf16; // = fp16
  const char* source;
};

// Dense figures from each GPU's datasheet.
const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {"H200", "H200", 66.9, 494.7, 989.4, "NVIDIA H200 datasheet"},
      {"H100 PCIe", "H100 PCIe", 51.2, 378.0, 756.0, "NVIDIA H100 datasheet"},
      {"H100", "H100 SXM", 66.9, 494.7, 989.4, "NVIDIA H100 datasheet"},
      {"A100", "A100", 19.5, 156.0, 312.0, "NVIDIA A100 datasheet"},
      {"L40S", "L40S", 91.6, 183.0, 362.05, "NVIDIA L40S datasheet"},
      {"L4", "L4", 30.3, 60.0, 121.0, "NVIDIA L4 datasheet"},
  };
  return rows;
}

} // namespace

std::optional<PeakFlops> peak_flops(
    const std::string& gpu_name,
    Precision precision) {
  for (const Row& r : table()) {
    if (gpu_name.find(r.match) == std::string::npos) {
      continue;
    }
    double tflops = r.fp32;
    const char* kind = "fp32";
    if (precision == Precision::Tf32) {
      tflops = r.tf32;
      kind = "tf32";
    } else if (precision == Precision::Bf16 || precision == Precision::Fp16) {
      tflops = r.bf16;
      kind = precision == Precision::Bf16 ? "bf16" : "fp16";
    }
    return PeakFlops{
        tflops * 1e12,
        fmt::format(
            "{} {} dense {:g} TFLOP/s ({})", r.label, kind, tflops, r.source)};
  }
  return std::nullopt;
}

ModelFlops training_flops(model::Model& model, const model::ModelOptions& o) {
  if (const double f = model.training_flops_per_sample(); f > 0) {
    return {f, "analytic"};
  }
  const std::int64_t tokens = model.tokens_per_sample();
  const at::Tensor sample = tokens > 0
      ? at::zeros({1, tokens}, at::kLong)
      : at::zeros({1, o.image.in_channels, o.image.size, o.image.size});
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
