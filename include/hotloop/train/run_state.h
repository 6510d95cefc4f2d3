#pragma once
// The facts the trainer's parts share: where the run is (step, epoch, the
// position in the data, the micro-batch plan) and what it works with (the
// model, the optimizer, the batches, the device). The loop advances it and
// the parts read it; callbacks get it const and never change it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "hotloop/data/loader.h"
#include "hotloop/model/model.h"

namespace hotloop::parallel {
class ProcessGroup;
}

namespace hotloop::train {

class Optimizer; // src/hotloop/train/optimizer.h
struct TrainerOptions;

struct RunState {
  // What the run works with.
  const TrainerOptions* options = nullptr; // as resolved (rank, world size)
  c10::Device device{c10::kCPU};
  int rank = 0;
  int world_size = 1;
  std::string run_dir; // "": the run writes no files
  parallel::ProcessGroup* group = nullptr; // data parallel; null: one process
  std::shared_ptr<model::Model> model;
  // Training FLOPs per sample (forward + backward) for model FLOP/s and MFU:
  // the model's analytic count, else the profiler's; 0: unknown.
  double flops_per_sample = 0;
  // The dense peak FLOP/s of all ranks' devices for the run's precision
  // (GPUs in the peak table; 0: none known, as on the CPU).
  double peak_flops_per_s = 0;
  std::string peak_source;
  Optimizer* optimizer = nullptr;
  data::BatchSource* batches = nullptr; // the training batches, in order
  // Raised to end the run after the current step (SIGINT/SIGTERM, a time
  // budget); may be null.
  const std::atomic<bool>* stop = nullptr;
  // The run's log: a line given here reaches every callback's on_message
  // (the console prints it on rank 0).
  std::function<void(const std::string&)> log;

  // Where the run is.
  std::int64_t step = 0; // optimizer steps done
  std::int64_t total_steps = 0;
  std::int64_t steps_per_epoch = 0;
  std::size_t epoch = 0;
  std::size_t next_batch = 0; // micro-batches of this epoch taken (per rank)
  std::int64_t micro_batch = 0; // samples per forward/backward on this rank
  std::int64_t accum_steps = 1; // micro-batches per optimizer step
  // The checkpoint's step when this process resumed a run; -1: a fresh start.
  std::int64_t resumed_at = -1;
  std::string last_checkpoint; // the newest written by this process

  bool stop_requested() const {
    return stop != nullptr && stop->load();
  }
};

} // namespace hotloop::train
