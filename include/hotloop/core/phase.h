#pragma once
// What a training process is doing, in one set of names: the trainer's
// callbacks hear it (Callback::on_phase), telemetry times each step's phases
// by it, and a data-parallel rank publishes it so that a failure elsewhere can
// name the rank that stopped and where.

namespace hotloop {

enum class Phase : int {
  Start, // set-up, before the first step
  Data, // waiting for the next batch (on a GPU: and its copy)
  Forward,
  Backward,
  AllReduce, // data parallel: gradients averaged across ranks
  Optimizer, // unscale, clip, update
  Graph, // CUDA graphs: forward, backward and update as one replay
  Evaluation,
  Checkpoint,
  Finished,
  Failed, // a collective failed; stopping
};

// "start", "data", "forward", "backward", "all-reduce", "optimizer", "graph",
// "evaluation", "checkpoint", "finished", "failed".
const char* to_string(Phase phase);

} // namespace hotloop
