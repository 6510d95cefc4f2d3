#include "hotloop/train/mixed_precision.h"

#include <fmt/format.h>

#include "hotloop/train/step.h"

namespace hotloop::train {

MixedPrecision::MixedPrecision(
    Precision precision,
    LossScaling scaling,
    const c10::Device& device,
    LossScalerOptions scaler)
    : precision_(precision),
      device_(device),
      scaler_(scaler, device, train::scales_loss(scaling, precision)) {}

bool MixedPrecision::unscale_and_check(
    const std::vector<std::pair<std::string, at::Tensor>>& named,
    const std::vector<at::Tensor>& params,
    std::int64_t step) {
  if (!scaler_.enabled()) {
    return false;
  }
  const bool skip = scaler_.update(scaler_.unscale(params));
  if (scaler_.collapsed()) {
    const std::string first = first_non_finite_gradient(named);
    throw StepFailure(
        fmt::format(
            "step {}: fp16 loss scaling collapsed (scale {}, {} steps skipped in a row); first non-finite gradient: {}",
            step,
            scaler_.current_scale(),
            scaler_.consecutive_skips(),
            first.empty() ? std::string("none found") : first),
        "lower the learning rate or enable --clip-grad-norm" + bf16_advice(),
        false);
  }
  return skip;
}

std::string MixedPrecision::bf16_advice() const {
  return device_.is_cuda() && mixed_precision_for(device_) == Precision::Bf16
      ? "; this GPU supports bf16: --precision bf16 needs no loss scaling"
      : "";
}

} // namespace hotloop::train
