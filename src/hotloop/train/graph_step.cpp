#include "hotloop/train/graph_step.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/core/first_line.h"
#include "hotloop/errors.h"
#include "hotloop/train/graph_policy.h"
#include "hotloop/train/optimizer.h"

namespace hotloop::train {

namespace {

// cuda::Graph as what GraphedStep captures with.
class CudaGraphBackend final : public GraphBackend {
 public:
  explicit CudaGraphBackend(int device) : graph_(device) {}
  void capture(const std::function<void()>& body) override {
    graph_.capture(body);
  }
  void replay() override {
    graph_.replay();
  }

 private:
  cuda::Graph graph_;
};

// HOTLOOP_FAKE_CUDA_GRAPH: the capture keeps the body, the replay runs it.
class ReplayBodyBackend final : public GraphBackend {
 public:
  void capture(const std::function<void()>& body) override {
    body_ = body;
  }
  void replay() override {
    body_();
  }

 private:
  std::function<void()> body_;
};

GraphStepOptions capture_options(bool required) {
  GraphStepOptions go;
  go.warmup_steps = kGraphWarmupSteps;
  go.required = required;
  return go;
}

} // namespace

GraphStep::GraphStep(
    StepParts parts,
    int device_index,
    bool required,
    std::function<void(const std::string&)> log,
    std::function<std::unique_ptr<GraphBackend>()> backend)
    : stream_(
          backend ? nullptr
                  : std::make_unique<cuda::StreamScope>(device_index)),
      eager_(std::move(parts), ""),
      capture_(
          capture_options(required),
          backend ? std::move(backend)
                  : [device_index]() -> std::unique_ptr<GraphBackend> {
            return std::make_unique<CudaGraphBackend>(device_index);
          },
          std::move(log)) {}

void GraphStep::body(const RunState& s) {
  const StepParts& p = eager_.parts();
  s.optimizer->zero_grad(); // None: backward allocates from the graph's pool
  at::Tensor loss;
  {
    const AutocastScope autocast = p.precision->autocast(/*cache=*/false);
    model::ModelBatch batch;
    batch.inputs = static_images_;
    batch.targets = static_labels_;
    loss = s.model->objective(batch, {s.options->label_smoothing});
  }
  p.precision->scale(loss).backward(); // the loss: a captured mode has no scale
  at::NoGradGuard no_grad;
  static_loss_.copy_(loss.detach());
  if (s.options->clip_grad_value > 0) {
    clip_gradient_values(p.params, s.options->clip_grad_value);
  }
  if (s.options->clip_grad_norm > 0) {
    static_grad_norm_.copy_(
        clip_gradients(p.params, s.options->clip_grad_norm, p.zero_norm));
  }
  s.optimizer->step_on_device();
}

StepResult GraphStep::run(const RunState& s, double lr) {
  if (capture_.state() == GraphedStep::State::Eager) {
    return eager_.run(s, lr);
  }
  StepResult r;
  try {
    data::Batch b = eager_.take_batch(s, 0, r);
    const at::Tensor images = s.options->channels_last && b.images.dim() == 4
        ? b.images.contiguous(at::MemoryFormat::ChannelsLast)
        : b.images;
    eager_.parts().events->phase(s, Phase::Graph);
    if (!static_images_.defined() || static_images_.sizes() != images.sizes() ||
        static_labels_.sizes() != b.labels.sizes()) {
      if (static_images_.defined()) {
        capture_.fall_back(fmt::format(
            "the batch changed shape from {} to {} (dynamic shapes)",
            fmt::join(static_images_.sizes(), "x"),
            fmt::join(images.sizes(), "x")));
      }
      static_images_ = at::empty_like(images);
      static_labels_ = at::empty_like(b.labels);
    }
    if (!static_loss_.defined()) {
      const auto o = at::TensorOptions().dtype(at::kFloat).device(s.device);
      static_loss_ = at::zeros({}, o);
      static_grad_norm_ = at::zeros({}, o);
    }
    static_images_.copy_(images);
    static_labels_.copy_(b.labels);
    s.optimizer->set_device_scalars(lr);
    // The warm-up's gradients go before the capture (its backward makes
    // them anew in the graph's pool), and the backend empties the cache.
    capture_.run([this, &s] { body(s); }, [&s] { s.optimizer->zero_grad(); });
    eager_.parts().faults->oom_if_above(images.size(0));
    r.stop = s.stop_requested();
    r.loss = static_loss_;
    r.grad_norm = static_grad_norm_;
    r.lr = lr;
    s.optimizer->count_device_step(); // the body applied the update
    eager_.check_devices_once(s, b);
  } catch (const c10::OutOfMemoryError& e) {
    r.out_of_memory = first_line(e.what());
    r.stop = s.stop_requested();
  }
  return r;
}

void GraphStep::plan_changed(const RunState& s) {
  if (s.accum_steps > 1 && capture_.state() != GraphedStep::State::Eager) {
    capture_.fall_back(fmt::format(
        "OOM recovery split the batch into {} micro-batches", s.accum_steps));
  }
}

std::unique_ptr<Step> make_step(
    const RunState& s,
    StepParts parts,
    const std::function<void(const std::string&)>& log) {
  const TrainerOptions& o = *s.options;
  GraphConditions c;
  const bool fake = parts.faults != nullptr && parts.faults->fake_cuda_graph;
  c.cuda_device = s.device.is_cuda() || fake;
  c.precision = parts.precision->capture_blocker();
  c.accum_steps = s.accum_steps;
  c.world_size = s.world_size;
  c.shard = parts.shard;
  c.steps_to_run = s.total_steps - s.step;
  c.packed_rows = s.batches != nullptr && s.batches->packed_rows();
  const GraphDecision d = decide_graph_capture(o.cuda_graphs, c);
  if (d.capture) {
    std::function<std::unique_ptr<GraphBackend>()> backend;
    if (fake && !s.device.is_cuda()) {
      backend = [] { return std::make_unique<ReplayBodyBackend>(); };
    }
    return std::make_unique<GraphStep>(
        std::move(parts),
        s.device.index(),
        o.cuda_graphs == CudaGraphs::On,
        log,
        std::move(backend));
  }
  if (o.cuda_graphs == CudaGraphs::On) {
    throw UsageError(
        "cuda-graphs: --cuda-graphs on, but " + d.reason,
        "use --cuda-graphs auto to run eagerly where graphs cannot");
  }
  if (s.device.is_cuda() && o.cuda_graphs == CudaGraphs::Auto) {
    log("CUDA graphs: off: " + d.reason);
  }
  return std::make_unique<EagerStep>(std::move(parts), d.reason);
}

} // namespace hotloop::train
