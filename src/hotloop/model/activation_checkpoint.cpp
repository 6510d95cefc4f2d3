#include "hotloop/model/activation_checkpoint.h"

#include <vector>

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace hotloop::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The autocast state of the forward, restored for the recompute: enabled
// and dtype per device type (CPU and CUDA), and whether casts are cached (a
// CUDA graph capture turns the cache off).
struct AutocastState {
  bool cpu = false;
  bool cuda = false;
  at::ScalarType cpu_dtype = at::kBFloat16;
  at::ScalarType cuda_dtype = at::kHalf;
  bool cache = true;

  static AutocastState now() {
    return {
        at::autocast::is_autocast_enabled(at::kCPU),
        at::autocast::is_autocast_enabled(at::kCUDA),
        at::autocast::get_autocast_dtype(at::kCPU),
        at::autocast::get_autocast_dtype(at::kCUDA),
        at::autocast::is_autocast_cache_enabled()};
  }
  std::vector<std::int64_t> to_ints() const {
    return {
        cpu,
        cuda,
        static_cast<std::int64_t>(cpu_dtype),
        static_cast<std::int64_t>(cuda_dtype),
        cache};
  }
  static AutocastState from_ints(const std::vector<std::int64_t>& v) {
    return {
        v[0] != 0,
        v[1] != 0,
        static_cast<at::ScalarType>(v[2]),
        static_cast<at::ScalarType>(v[3]),
        v[4] != 0};
  }
  void apply() const {
    at::autocast::set_autocast_enabled(at::kCPU, cpu);
    at::autocast::set_autocast_enabled(at::kCUDA, cuda);
    at::autocast::set_autocast_dtype(at::kCPU, cpu_dtype);
    at::autocast::set_autocast_dtype(at::kCUDA, cuda_dtype);
    at::autocast::set_autocast_cache_enabled(cache);
  }
};

// The recompute as an autocast region of its own, as torch.autocast's
// __enter__/__exit__ make one: the forward's state for its lifetime, and the
// cast cache dropped when the outermost region ends. Without the nesting
// count, the lower-precision copies of the weights cast in the recompute
// stay cached outside any region (on CUDA the recompute runs on autograd's
// device thread, whose nesting count no forward region touches), and the
// next forward uses copies from before the optimizer's update.
class RecomputeRegion {
 public:
  explicit RecomputeRegion(const AutocastState& forward)
      : before_(AutocastState::now()), active_(forward.cpu || forward.cuda) {
    forward.apply();
    if (active_) {
      at::autocast::increment_nesting();
    }
  }
  ~RecomputeRegion() {
    if (active_ && at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    before_.apply();
  }
  RecomputeRegion(const RecomputeRegion&) = delete;
  RecomputeRegion& operator=(const RecomputeRegion&) = delete;

 private:
  AutocastState before_;
  bool active_;
};

// The segment's forward and its side inputs, as the autograd node keeps
// them: one of the two function pointers is set.
struct SegmentCall {
  torch::nn::Module* segment = nullptr;
  SegmentForward plain = nullptr;
  SegmentForwardWithSide with_side = nullptr;

  at::Tensor operator()(const at::Tensor& input, const SegmentSide& side)
      const {
    return with_side != nullptr ? with_side(*segment, input, side)
                                : plain(*segment, input);
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
      SegmentCall call,
      const SegmentSide& side) {
    variable_list saved = {input};
    saved.insert(saved.end(), side.tensors.begin(), side.tensors.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["segment"] = reinterpret_cast<std::int64_t>(call.segment);
    ctx->saved_data["plain"] = reinterpret_cast<std::int64_t>(call.plain);
    ctx->saved_data["with_side"] =
        reinterpret_cast<std::int64_t>(call.with_side);
    ctx->saved_data["ints"] = side.ints;
    ctx->saved_data["autocast"] = AutocastState::now().to_ints();
    (void)anchor;
    return call(input, side); // grad mode is off here: nothing is kept
  }

  static variable_list backward(
      AutogradContext* ctx,
      variable_list grad_outputs) {
    const variable_list saved_tensors = ctx->get_saved_variables();
    const at::Tensor& saved = saved_tensors[0];
    SegmentCall call;
    call.segment = reinterpret_cast<torch::nn::Module*>(
        ctx->saved_data["segment"].toInt());
    call.plain =
        reinterpret_cast<SegmentForward>(ctx->saved_data["plain"].toInt());
    call.with_side = reinterpret_cast<SegmentForwardWithSide>(
        ctx->saved_data["with_side"].toInt());
    SegmentSide side;
    side.tensors.assign(saved_tensors.begin() + 1, saved_tensors.end());
    side.ints = ctx->saved_data["ints"].toIntVector();
    const AutocastState forward =
        AutocastState::from_ints(ctx->saved_data["autocast"].toIntVector());
    at::Tensor input = saved.detach().requires_grad_(saved.requires_grad());
    at::Tensor output;
    {
      const RecomputeRegion region(forward);
      at::AutoGradMode grad(true);
      output = call(input, side);
    }
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

at::Tensor run_checkpointed(
    const SegmentCall& call,
    const at::Tensor& input,
    const SegmentSide& side) {
  if (!at::GradMode::is_enabled()) {
    return call(input, side); // evaluation: nothing to save anyway
  }
  static thread_local const at::Tensor anchor =
      at::ones({}).requires_grad_(true);
  return Recompute::apply(input, anchor, call, side);
}

} // namespace

at::Tensor checkpoint(
    torch::nn::Module& segment,
    SegmentForward forward,
    const at::Tensor& input) {
  return run_checkpointed({&segment, forward, nullptr}, input, {});
}

at::Tensor checkpoint(
    torch::nn::Module& segment,
    SegmentForwardWithSide forward,
    const at::Tensor& input,
    const SegmentSide& side) {
  return run_checkpointed({&segment, nullptr, forward}, input, side);
}

} // namespace hotloop::model
