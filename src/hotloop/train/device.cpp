#include "hotloop/train/device.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

c10::Device resolve_device(const std::string& text) {
  if (text == "auto") {
    return at::hasCUDA() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  const c10::Device d(text == "cuda" ? "cuda:0" : text);
  if (d.is_cuda() && !at::hasCUDA()) {
    throw EnvError(
        fmt::format("--device {}: CUDA is not available", text),
        "run `hotloop doctor` to see why, or use --device cpu");
  }
  return d;
}

} // namespace hotloop::train
