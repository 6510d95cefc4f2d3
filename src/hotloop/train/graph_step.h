#pragma once
// The training step as one replayed CUDA graph (graph_policy.h says when a
// run can; graph_capture.h's GraphedStep captures, replays and falls back):
// the batch is copied into static tensors, the learning rate written on the
// device, and zero_grad, forward, backward, clipping and the optimizer's
// update replay as one launch. Once the capture has fallen back (a batch of
// another shape, a model that cannot be captured, OOM recovery splitting the
// batch), every step is the eager one.

#include <functional>
#include <memory>
#include <string>

#include "hotloop/cuda/cuda_graph.h"
#include "hotloop/train/eager_step.h"
#include "hotloop/train/graph_capture.h"

namespace hotloop::train {

class GraphStep final : public Step {
 public:
  // `backend`: what captures and replays (empty: a CUDA graph on
  // `device_index`'s capture stream; tests give a fake and no stream).
  GraphStep(
      StepParts parts,
      int device_index,
      bool required,
      std::function<void(const std::string&)> log,
      std::function<std::unique_ptr<GraphBackend>()> backend = {});

  StepResult run(const RunState& s, double lr) override;
  void plan_changed(const RunState& s) override;
  std::int64_t graph_replays() const override {
    return capture_.replays();
  }
  bool graph_capture_out_of_memory() const override {
    return capture_.capture_out_of_memory();
  }
  std::string graph_off_reason() const override {
    return capture_.fallback_reason();
  }

 private:
  // What the graph captures; run eagerly for the warm-up steps.
  void body(const RunState& s);

  // First: the capture's stream, for the run (none with a fake backend).
  std::unique_ptr<cuda::StreamScope> stream_;
  EagerStep eager_;
  GraphedStep capture_;
  at::Tensor static_images_, static_labels_, static_loss_, static_grad_norm_;
};

// The step a run uses: a GraphStep when decide_graph_capture() allows it,
// else an EagerStep that knows why not (logged on a GPU under
// --cuda-graphs auto; a UsageError under --cuda-graphs on).
std::unique_ptr<Step> make_step(
    const RunState& s,
    StepParts parts,
    const std::function<void(const std::string&)>& log);

} // namespace hotloop::train
