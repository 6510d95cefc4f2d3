#include "hotloop/train/precision.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/errors.h"
#include "hotloop/train/loss_scaler.h"

namespace hotloop::train {

Precision parse_precision(const std::string& text) {
  return parse_named<Precision>(kPrecisionNames, text, "precision");
}

const char* to_string(Precision p) {
  return name_of<Precision>(kPrecisionNames, p);
}

void configure_math_mode(Precision p, const c10::Device& device) {
  if (!device.is_cuda()) {
    return;
  }
  // Autocast handles bf16/fp16; what is left in fp32 there follows tf32's
  // choice too (PyTorch's default keeps fp32 exact).
  const bool tf32 = p != Precision::Fp32;
  at::globalContext().setAllowTF32CuBLAS(tf32);
  at::globalContext().setAllowTF32CuDNN(tf32);
}

c10::ScalarType compute_dtype(Precision p) {
  switch (p) {
    case Precision::Bf16:
      return at::kBFloat16;
    case Precision::Fp16:
      return at::kHalf;
    default:
      return c10::ScalarType::Undefined;
  }
}

AutocastScope::AutocastScope(Precision p, const c10::Device& device, bool cache)
    : device_type_(device.type()) {
  if (p != Precision::Bf16 && p != Precision::Fp16) {
    return;
  }
  if (p == Precision::Fp16 && !device.is_cuda()) {
    throw UsageError(
        "--precision fp16 needs a CUDA device",
        "use --precision bf16 on the CPU");
  }
  active_ = true;
  was_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  was_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  was_caching_ = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(cache);
  at::autocast::set_autocast_dtype(device_type_, compute_dtype(p));
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) {
    return;
  }
  // The cast cache lives while any autocast region is open; leaving the
  // outermost one drops it (as torch.autocast's __exit__ does).
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
  at::autocast::set_autocast_dtype(device_type_, was_dtype_);
  at::autocast::set_autocast_cache_enabled(was_caching_);
}

Precision mixed_precision_for(const c10::Device& device) {
  if (!device.is_cuda()) {
    return Precision::Bf16;
  }
  const int index = device.has_index() ? device.index() : 0;
  for (const auto& d : cuda::state().devices) {
    if (d.index == index) {
      return d.major >= 8 ? Precision::Bf16 : Precision::Fp16;
    }
  }
  return Precision::Fp16;
}

InferencePrecision inference_precision(
    std::optional<Precision> asked,
    std::optional<Precision> trained,
    std::optional<Precision> gpu) {
  if (asked) {
    if (*asked == Precision::Fp16 && !gpu) {
      throw UsageError(
          "--precision fp16 needs a CUDA device",
          "use --precision bf16 on the CPU");
    }
    return {*asked, "asked"};
  }
  if (!gpu) {
    return {Precision::Fp32, "the CPU"};
  }
  if (trained == Precision::Bf16 && *gpu != Precision::Bf16) {
    // A GPU before compute capability 8.0 has no bf16 units (autocast
    // would emulate it): fp32, as its training recipe would have been.
    return {Precision::Fp32, "trained in bf16, which this GPU lacks"};
  }
  if (trained) {
    return {*trained, "trained in"};
  }
  return {
      *gpu == Precision::Bf16 ? Precision::Bf16 : Precision::Fp32,
      "the recipe"};
}

bool PrecisionMode::unscale_and_check(
    const model::StateDict& /*named*/,
    const std::vector<at::Tensor>& /*params*/,
    std::int64_t /*step*/) {
  return false;
}

void PrecisionMode::load_state(const model::StateDict& /*state*/) {}

namespace {

// A precision without loss scaling: the forward pass in autocast for bf16
// and fp16, outside it for fp32 and tf32 (AutocastScope is inactive there).
class PlainPrecision final : public PrecisionMode {
 public:
  PlainPrecision(Precision p, const c10::Device& device)
      : precision_(p), device_(device) {
    if (p == Precision::Fp16 && !device.is_cuda()) {
      throw UsageError(
          "--precision fp16 needs a CUDA device",
          "use --precision bf16 on the CPU");
    }
  }
  Precision precision() const override {
    return precision_;
  }
  AutocastScope autocast(bool cache) const override {
    return AutocastScope(precision_, device_, cache);
  }

 private:
  Precision precision_;
  c10::Device device_;
};

} // namespace

std::unique_ptr<PrecisionMode> make_precision(
    Precision p,
    LossScaling scaling,
    const c10::Device& device) {
  // A new mode (its own class, in its own file) is chosen here.
  std::unique_ptr<PrecisionMode> mode =
      std::make_unique<PlainPrecision>(p, device);
  if (scales_loss(scaling, p)) {
    mode = with_loss_scaling(std::move(mode), device);
  }
  return mode;
}

} // namespace hotloop::train
