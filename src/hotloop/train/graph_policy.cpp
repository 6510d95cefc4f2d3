#include "hotloop/train/graph_policy.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

CudaGraphs parse_cuda_graphs(const std::string& text) {
  if (text == "auto") {
    return CudaGraphs::Auto;
  }
  if (text == "on") {
    return CudaGraphs::On;
  }
  if (text == "off") {
    return CudaGraphs::Off;
  }
  throw UsageError(
      fmt::format("cuda-graphs '{}': expected auto, on or off", text));
}

const char* to_string(CudaGraphs mode) {
  switch (mode) {
    case CudaGraphs::Auto:
      return "auto";
    case CudaGraphs::On:
      return "on";
    case CudaGraphs::Off:
      return "off";
  }
  return "?";
}

GraphDecision decide_graph_capture(CudaGraphs mode, const GraphConditions& c) {
  auto no = [](std::string why) {
    return GraphDecision{false, std::move(why)};
  };
  if (mode == CudaGraphs::Off) {
    return no("--cuda-graphs off");
  }
  if (!c.cuda_device) {
    return no("the device is the CPU (CUDA graphs are a GPU feature)");
  }
  if (c.loss_scaling) {
    return no(
        "fp16 loss scaling (or --loss-scaling on) decides on the host whether to skip each step (bf16 needs no loss scaling)");
  }
  if (c.world_size > 1) {
    return no(
        "data parallel: gradients are all-reduced from autograd hooks and the ranks agree on every step");
  }
  if (c.accum_steps > 1) {
    return no(fmt::format(
        "gradient accumulation ({} micro-batches per step): the capture covers one micro-batch per step",
        c.accum_steps));
  }
  if (c.steps_to_run <= kGraphWarmupSteps) {
    return no(fmt::format(
        "{} step(s) to run: a capture pays off after {} warm-up steps",
        c.steps_to_run,
        kGraphWarmupSteps));
  }
  return {true, ""};
}

} // namespace hotloop::train
