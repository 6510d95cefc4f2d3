#include "hotloop/train/loss_scaler.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>

#include <cmath>

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/train/step.h"

namespace hotloop::train {

LossScaler::LossScaler(LossScalerOptions options, const c10::Device& device)
    : options_(options) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::full({1}, options_.init_scale, f32);
  host_scale_ = static_cast<float>(options_.init_scale);
  growth_tracker_ = at::zeros({1}, f32.dtype(at::kInt));
  found_inf_ = at::zeros({1}, f32);
}

at::Tensor LossScaler::scale(const at::Tensor& loss) const {
  return loss * scale_.to(loss.scalar_type());
}

bool LossScaler::unscale(const std::vector<at::Tensor>& params) {
  found_inf_.zero_();
  const at::Tensor inv_scale = at::reciprocal(scale_);
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) {
      grads.push_back(p.grad());
    }
  }
  if (!grads.empty()) {
    at::_amp_foreach_non_finite_check_and_unscale_(
        grads, found_inf_, inv_scale);
  }
  return found_inf_.item<float>() != 0.0f;
}

bool LossScaler::update(bool found_inf) {
  found_inf_.fill_(found_inf ? 1.0 : 0.0);
  at::_amp_update_scale_(
      scale_,
      growth_tracker_,
      found_inf_,
      options_.growth_factor,
      options_.backoff_factor,
      options_.growth_interval);
  // The same update on the host, in the kernel's float arithmetic, so that
  // reading the scale (every step: the collapse check, the step's record)
  // costs no synchronization.
  if (found_inf) {
    host_scale_ = static_cast<float>(host_scale_ * options_.backoff_factor);
    host_tracker_ = 0;
  } else if (host_tracker_ + 1 == options_.growth_interval) {
    const auto grown = static_cast<float>(host_scale_ * options_.growth_factor);
    if (std::isfinite(grown)) {
      host_scale_ = grown;
    }
    host_tracker_ = 0;
  } else {
    ++host_tracker_;
  }
  if (found_inf) {
    ++skipped_;
    ++consecutive_skips_;
  } else {
    consecutive_skips_ = 0;
  }
  return found_inf;
}

bool LossScaler::collapsed() const {
  return current_scale() < options_.min_scale ||
      consecutive_skips_ >= options_.max_consecutive_skips;
}

double LossScaler::current_scale() const {
  return host_scale_;
}

std::vector<std::pair<std::string, at::Tensor>> LossScaler::state() const {
  return {
      {"scale", scale_},
      {"growth_tracker", growth_tracker_},
      {"skipped", at::scalar_tensor(skipped_, at::kLong)},
      {"consecutive_skips", at::scalar_tensor(consecutive_skips_, at::kLong)}};
}

void LossScaler::load_state(
    const std::vector<std::pair<std::string, at::Tensor>>& state) {
  for (const auto& [name, t] : state) {
    if (name == "scale") {
      scale_.copy_(t);
      host_scale_ = t.to(at::kFloat).reshape({-1})[0].item<float>();
    } else if (name == "growth_tracker") {
      growth_tracker_.copy_(t);
      host_tracker_ = t.to(at::kLong).reshape({-1})[0].item<std::int64_t>();
    } else if (name == "skipped") {
      skipped_ = t.item<std::int64_t>();
    } else if (name == "consecutive_skips") {
      consecutive_skips_ = t.item<std::int64_t>();
    } else {
      throw DataError(
          "loss scaler state " + name + " is not one hotloop writes");
    }
  }
}

std::string first_non_finite_gradient(
    const std::vector<std::pair<std::string, at::Tensor>>& named_params) {
  for (const auto& [name, p] : named_params) {
    if (p.grad().defined() && !at::isfinite(p.grad()).all().item<bool>()) {
      return name;
    }
  }
  return {};
}

namespace {

class LossScaled final : public PrecisionMode {
 public:
  LossScaled(
      std::unique_ptr<PrecisionMode> inner,
      const c10::Device& device,
      LossScalerOptions options)
      : inner_(std::move(inner)), device_(device), scaler_(options, device) {}

  Precision precision() const override {
    return inner_->precision();
  }
  AutocastScope autocast(bool cache) const override {
    return inner_->autocast(cache);
  }
  at::Tensor scale(const at::Tensor& loss) const override {
    return scaler_.scale(inner_->scale(loss));
  }
  bool unscale_and_check(
      const model::StateDict& named,
      const std::vector<at::Tensor>& params,
      std::int64_t step) override {
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
    return skip || inner_->unscale_and_check(named, params, step);
  }
  bool skips_overflow() const override {
    return true;
  }
  std::string capture_blocker() const override {
    return "fp16 loss scaling (or --loss-scaling on) decides on the host whether to skip each step (bf16 needs no loss scaling)";
  }
  std::int64_t skipped_steps() const override {
    return scaler_.skipped_steps();
  }
  double loss_scale() const override {
    return scaler_.current_scale();
  }
  model::StateDict state() const override {
    return scaler_.state();
  }
  void load_state(const model::StateDict& state) override {
    scaler_.load_state(state);
  }

 private:
  // "; this GPU supports bf16: ..." where it does, for the collapse's fix.
  std::string bf16_advice() const {
    return device_.is_cuda() && mixed_precision_for(device_) == Precision::Bf16
        ? "; this GPU supports bf16: --precision bf16 needs no loss scaling"
        : "";
  }

  std::unique_ptr<PrecisionMode> inner_;
  c10::Device device_;
  LossScaler scaler_;
};

} // namespace

std::unique_ptr<PrecisionMode> with_loss_scaling(
    std::unique_ptr<PrecisionMode> inner,
    const c10::Device& device,
    LossScalerOptions options) {
  return std::make_unique<LossScaled>(std::move(inner), device, options);
}

} // namespace hotloop::train
