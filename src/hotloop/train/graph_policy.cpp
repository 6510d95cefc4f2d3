#include "hotloop/train/graph_policy.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::train {

CudaGraphs parse_cuda_graphs(const std::string& text) {
  return parse_named<CudaGraphs>(kCudaGraphsNames, text, "cuda-graphs");
}

const char* to_string(CudaGraphs mode) {
  return name_of<CudaGraphs>(kCudaGraphsNames, mode);
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
  if (!c.precision.empty()) {
    return no(c.precision);
  }
  if (c.world_size > 1 && c.shard == 3) {
    return no(
        "--shard 3: each block's parameters are allocated, all-gathered and freed around every use, at addresses a captured graph cannot keep, and the ranks agree on every step");
  }
  if (c.world_size > 1 && c.shard > 0) {
    return no(fmt::format(
        "--shard {}: gradients are reduced from autograd hooks, the updated shards all-gathered after the optimizer, and the ranks agree on every step",
        c.shard));
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
  if (c.packed_rows) {
    return no(
        "rows packed with several examples (--packing best-fit): where each example starts changes from batch to batch");
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
