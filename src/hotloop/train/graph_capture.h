#pragma once
// Capturing the training step as a CUDA graph (GraphStep in graph_step.h
// drives it), with the fallback to eager.
// run(body) runs `body` eagerly for the warm-up steps, then captures it once
// and replays it on every later call. `body` must read its inputs from and
// write its outputs to tensors that keep their address (the static batch,
// the parameters, their gradients, the optimizer's state and device scalars).
// When the capture fails (a model that cannot be captured), the backend is
// destroyed first (it ends what the failed capture left open), then the step
// runs eagerly and so does every later one, with the reason in the log; with
// `required` (--cuda-graphs on) that is an error instead.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace hotloop::train {

// What captures and replays: cuda::Graph in the trainer, a fake in tests.
class GraphBackend {
 public:
  virtual ~GraphBackend() = default;
  // Records `body` without running it; throws when it cannot be captured.
  virtual void capture(const std::function<void()>& body) = 0;
  virtual void replay() = 0;
};

struct GraphStepOptions {
  std::int64_t warmup_steps = 3;
  bool required = false; // --cuda-graphs on: no fallback, an error
};

class GraphedStep {
 public:
  enum class State { WarmingUp, Replaying, Eager };

  GraphedStep(
      GraphStepOptions options,
      std::function<std::unique_ptr<GraphBackend>()> make_backend,
      std::function<void(const std::string&)> log);

  // One training step (see above). `before_capture` runs right before the
  // capture, after the warm-up: the training step drops the warm-up's
  // gradients there, so that the capture's backward allocates them in the
  // graph's pool instead of beside a second set still cached.
  void run(
      const std::function<void()>& body,
      const std::function<void()>& before_capture = {});
  // Eager from now on (the batch changed shape, OOM recovery split the
  // batch): logs why; with `required`, throws Error instead. Outside run().
  void fall_back(const std::string& reason);

  State state() const {
    return state_;
  }
  const std::string& fallback_reason() const {
    return reason_;
  }
  std::int64_t replays() const {
    return replays_;
  }
  // The capture failed for want of memory (then the step ran eagerly, or,
  // with `required`, the out-of-memory error went on to the caller).
  bool capture_out_of_memory() const {
    return capture_out_of_memory_;
  }

 private:
  GraphStepOptions options_;
  std::function<std::unique_ptr<GraphBackend>()> make_backend_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<GraphBackend> backend_;
  State state_ = State::WarmingUp;
  std::int64_t eager_runs_ = 0;
  std::int64_t replays_ = 0;
  bool capture_out_of_memory_ = false;
  std::string reason_;
};

} // namespace hotloop::train
