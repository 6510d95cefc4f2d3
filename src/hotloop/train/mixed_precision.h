#pragma once
// A run's precision as one object: the autocast region a forward pass runs
// in, and loss scaling with its unscale-and-check (the part of a step that
// decides whether an fp16 step is applied).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "hotloop/train/loss_scaler.h"
#include "hotloop/train/options.h"
#include "hotloop/train/precision.h"

namespace hotloop::train {

class MixedPrecision {
 public:
  MixedPrecision(
      Precision precision,
      LossScaling scaling,
      const c10::Device& device,
      LossScalerOptions scaler = {});

  Precision precision() const {
    return precision_;
  }
  // The autocast region (bf16/fp16; nothing for fp32/tf32). `cache` false
  // for a CUDA graph capture (see AutocastScope).
  AutocastScope autocast(bool cache = true) const {
    return AutocastScope(precision_, device_, cache);
  }
  bool scales_loss() const {
    return scaler_.enabled();
  }
  at::Tensor scale(const at::Tensor& loss) const {
    return scaler_.scale(loss);
  }
  // After backward, with loss scaling: unscales the gradients of `params`
  // (named: trainable, in order) in place, checks them and updates the
  // scale. Returns true when step `step` (1-based) must be skipped. Throws
  // StepFailure when the scale has collapsed. False without loss scaling.
  bool unscale_and_check(
      const std::vector<std::pair<std::string, at::Tensor>>& named,
      const std::vector<at::Tensor>& params,
      std::int64_t step);

  LossScaler& scaler() {
    return scaler_;
  }
  const LossScaler& scaler() const {
    return scaler_;
  }
  // "; this GPU supports bf16: ..." where it does, for fixes.
  std::string bf16_advice() const;

 private:
  Precision precision_;
  c10::Device device_;
  LossScaler scaler_;
};

} // namespace hotloop::train
