#pragma once
// Whether a run can capture its training step as one CUDA graph. A graph
// replays the same kernels on the same memory, so the step must have static
// shapes and take no decision on the host between its kernels. What rules it
// out, each with the reason the log gives:
// - the CPU (graphs are a CUDA feature);
// - a precision mode that decides on the host (loss scaling: fp16, or
//   --loss-scaling on, skips overflowing steps;
//   PrecisionMode::capture_blocker);
// - gradient accumulation: the capture covers one micro-batch per step;
// - data parallel: gradients are all-reduced from autograd hooks and the
//   ranks agree on each step (OOM, stop) over the network;
// - a run shorter than the warm-up plus one step (batch-size trials run 5
//   steps: they capture as the run will, batch_finder.h).
// Found only at run time, and then a fallback to eager: a batch of another
// shape (dynamic shapes), an OOM recovery that splits the batch, a model
// that cannot be captured (a CPU op or a host read in its forward: the
// capture throws). See graph_capture.h.

#include <cstdint>
#include <string>

#include "hotloop/train/options.h"

namespace hotloop::train {

struct GraphConditions {
  bool cuda_device = false;
  std::string precision; // why the precision mode cannot be captured, or ""
  std::int64_t accum_steps = 1;
  int world_size = 1;
  int shard = 0; // the ZeRO stage (--shard) of a data-parallel run
  std::int64_t steps_to_run = 0; // steps this process will still run
  bool packed_rows = false; // batches of rows packed with several examples
};

// Eager steps before the capture: lazy initialization (cuDNN's autotuner,
// cuBLAS workspaces, optimizer state) happens there, not inside the graph.
constexpr std::int64_t kGraphWarmupSteps = 3;

struct GraphDecision {
  bool capture = false;
  std::string reason; // why not; empty when capture
};

GraphDecision decide_graph_capture(CudaGraphs mode, const GraphConditions& c);

} // namespace hotloop::train
