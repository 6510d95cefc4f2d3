#include "hotloop/model/activation_checkpoint.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace hotloop::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The autocast state to restore in the recompute (CPU and CUDA).
struct AutocastState {
  bool cpu = false;
  bool cuda = false;
  at::ScalarType cpu_dtype = at::kBFloat16;
  at::ScalarType cuda_dtype = at::kHalf;

  static AutocastState now() {
    return {
        at::autocast::is_autocast_enabled(at::kCPU),
        at::autocast::is_autocast_enabled(at::kCUDA),
        at::autocast::get_autocast_dtype(at::kCPU),
        at::autocast::get_autocast_dtype(at::kCUDA)};
  }
  void apply() const {
    at::autocast::set_autocast_enabled(at::kCPU, cpu);
    at::autocast::set_autocast_enabled(at::kCUDA, cuda);
    at::autocast::set_autocast_dtype(at::kCPU, cpu_dtype);
    at::autocast::set_autocast_dtype(at::kCUDA, cuda_dtype);
  }
};

class Recompute : public torch::autograd::Function<Recompute> {
 public:
  // `anchor` is a scalar that requires grad, so the output does even when the
  // input does not (the stem's input is the images): the segment's
  // parameters still get their gradients.
  static at::Tensor forward(
      AutogradContext* ctx,
      const at::Tensor& input,
      const at::Tensor& anchor,
      torch::nn::Module* segment,
      SegmentForward fn) {
    ctx->save_for_backward({input});
    ctx->saved_data["segment"] = reinterpret_cast<std::int64_t>(segment);
    ctx->saved_data["fn"] = reinterpret_cast<std::int64_t>(fn);
    const AutocastState a = AutocastState::now();
    ctx->saved_data["autocast"] = std::vector<std::int64_t>{
        a.cpu,
        a.cuda,
        static_cast<std::int64_t>(a.cpu_dtype),
        static_cast<std::int64_t>(a.cuda_dtype)};
    (void)anchor;
    return fn(*segment, input); // grad mode is off here: nothing is kept
  }

  static variable_list backward(
      AutogradContext* ctx,
      variable_list grad_outputs) {
    const at::Tensor saved = ctx->get_saved_variables()[0];
    auto* segment = reinterpret_cast<torch::nn::Module*>(
        ctx->saved_data["segment"].toInt());
    auto fn = reinterpret_cast<SegmentForward>(ctx->saved_data["fn"].toInt());
    const auto a = ctx->saved_data["autocast"].toIntVector();
    const AutocastState before = AutocastState::now();
    AutocastState{
        a[0] != 0,
        a[1] != 0,
        static_cast<at::ScalarType>(a[2]),
        static_cast<at::ScalarType>(a[3])}
        .apply();
    at::Tensor input = saved.detach().requires_grad_(saved.requires_grad());
    at::Tensor output;
    {
      at::AutoGradMode grad(true);
      output = fn(*segment, input);
    }
    before.apply();
    // Gradients flow into the segment's parameters here (accumulated as in
    // any backward), and into `input`.
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {
        input.requires_grad() ? input.grad() : at::Tensor(),
        at::Tensor(),
        at::Tensor(),
        at::Tensor()};
  }
};

} // namespace

at::Tensor checkpoint(
    torch::nn::Module& segment,
    SegmentForward forward,
    const at::Tensor& input) {
  if (!at::GradMode::is_enabled()) {
    return forward(segment, input); // evaluation: nothing to save anyway
  }
  static thread_local const at::Tensor anchor =
      at::ones({}).requires_grad_(true);
  return Recompute::apply(input, anchor, &segment, forward);
}

} // namespace hotloop::model
