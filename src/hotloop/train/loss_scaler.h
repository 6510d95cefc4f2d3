#pragma once
// Dynamic loss scaling for fp16, in C++ over ATen's AMP kernels (LibTorch has
// no GradScaler): the loss is multiplied by a scale before backward; gradients
// are unscaled and checked for inf/NaN in one multi-tensor kernel; a step with
// a non-finite gradient is skipped and the scale backs off; after
// `growth_interval` good steps in a row it grows. with_loss_scaling makes it
// a precision mode over another one (precision.h).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "hotloop/train/precision.h"

namespace hotloop::train {

struct LossScalerOptions {
  double init_scale = 65536.0; // 2^16, as torch.amp.GradScaler
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  // Collapse: the scale fell below this, or this many steps in a row were
  // skipped. The run stops with a diagnosis.
  double min_scale = 1.0 / 1024;
  std::int64_t max_consecutive_skips = 25;
};

class LossScaler {
 public:
  LossScaler(LossScalerOptions options, const c10::Device& device);

  // loss * scale.
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients of `params` by the scale in place and reports
  // whether any is inf or NaN: the step's one device->host read (the skip
  // is decided on the host, as torch.amp.GradScaler.step does).
  bool unscale(const std::vector<at::Tensor>& params);
  // After unscale: backs off (found_inf) or counts toward growth. Returns true
  // when the step must be skipped.
  bool update(bool found_inf);
  // The scale has collapsed: stop the run (see LossScalerOptions).
  bool collapsed() const;

  // The scale, from the host's copy of the update (no device read).
  double current_scale() const;
  std::int64_t skipped_steps() const {
    return skipped_;
  }
  std::int64_t consecutive_skips() const {
    return consecutive_skips_;
  }
  // For checkpoints: scale, growth tracker, skip counts.
  std::vector<std::pair<std::string, at::Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state);

 private:
  LossScalerOptions options_;
  at::Tensor scale_; // (1,) float32 on the device
  at::Tensor growth_tracker_; // (1,) int32 on the device
  at::Tensor found_inf_; // (1,) float32 on the device
  // scale_ and growth_tracker_ as the host computes them alongside.
  float host_scale_ = 0;
  std::int64_t host_tracker_ = 0;
  std::int64_t skipped_ = 0;
  std::int64_t consecutive_skips_ = 0;
};

// Loss scaling over `inner` (whose autocast region and precision it keeps):
// the loss is scaled before backward; the gradients are unscaled and checked
// before the update; an overflowing step is skipped; a collapsed scale stops
// the run (StepFailure, naming the first non-finite gradient). The skip is
// decided on the host, so a step under it cannot be captured as a graph.
std::unique_ptr<PrecisionMode> with_loss_scaling(
    std::unique_ptr<PrecisionMode> inner,
    const c10::Device& device,
    LossScalerOptions options = {});

// The first parameter (by name) whose gradient holds inf or NaN, or "".
std::string first_non_finite_gradient(
    const std::vector<std::pair<std::string, at::Tensor>>& named_params);

} // namespace hotloop::train
