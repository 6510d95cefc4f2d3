#include "hotloop/train/graph_capture.h"

#include <exception>

#include <c10/util/Exception.h>

#include <fmt/format.h>

#include "hotloop/core/first_line.h"
#include "hotloop/errors.h"

namespace hotloop::train {

GraphedStep::GraphedStep(
    GraphStepOptions options,
    std::function<std::unique_ptr<GraphBackend>()> make_backend,
    std::function<void(const std::string&)> log)
    : options_(options),
      make_backend_(std::move(make_backend)),
      log_(std::move(log)) {}

void GraphedStep::fall_back(const std::string& reason) {
  if (state_ == State::Eager) {
    return;
  }
  backend_.reset(); // frees the graph's memory pool
  state_ = State::Eager;
  reason_ = reason;
  if (options_.required) {
    throw Error(
        "--cuda-graphs on: " + reason,
        "use --cuda-graphs auto to run such steps eagerly");
  }
  log_("CUDA graphs: off from here on: " + reason + "; running eagerly");
}

void GraphedStep::run(
    const std::function<void()>& body,
    const std::function<void()>& before_capture) {
  switch (state_) {
    case State::Eager:
      body();
      return;
    case State::Replaying:
      backend_->replay();
      ++replays_;
      return;
    case State::WarmingUp:
      break;
  }
  if (eager_runs_ < options_.warmup_steps) {
    body();
    ++eager_runs_;
    return;
  }
  try {
    if (before_capture) {
      before_capture();
    }
    backend_ = make_backend_();
    backend_->capture(body);
  } catch (const c10::OutOfMemoryError&) {
    capture_out_of_memory_ = true;
    if (options_.required) {
      backend_.reset();
      throw; // an OOM like any other: recovery, or the memory report
    }
    fall_back(
        "the capture ran out of memory (its pool holds the step's activations and gradients; a smaller batch would fit)");
    body();
    return;
  } catch (const std::exception& e) {
    fall_back(fmt::format(
        "the step could not be captured ({})", first_line(e.what())));
    body(); // this step, eagerly: the capture ran none of its kernels
    return;
  }
  state_ = State::Replaying;
  log_(fmt::format(
      "CUDA graphs: the step was captured after {} eager warm-up step(s); replaying it",
      eager_runs_));
  backend_->replay(); // the capture only recorded this step
  ++replays_;
}

} // namespace hotloop::train
