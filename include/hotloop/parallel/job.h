#pragma once
// Joining the data-parallel job a launcher started (torchrun, srun, hotloop
// launch): each rank on the GPU of its local rank, the process group on NCCL
// (CUDA) or Gloo (the CPU), and the node's CPU cores shared by its ranks
// (torchrun sets OMP_NUM_THREADS=1 for the same reason).

#include <memory>
#include <string>

#include "hotloop/parallel/dist_env.h"
#include "hotloop/parallel/process_group.h"

namespace hotloop::parallel {

struct JobOptions {
  std::string backend =
      "auto"; // auto (nccl on CUDA, gloo on the CPU), gloo, nccl
  double timeout_s = 300; // rendezvous and each collective
};

struct Job {
  DistEnv env;
  std::shared_ptr<ProcessGroup> group; // null: not launched (one process)
  std::string backend; // "gloo" | "nccl" when launched
  std::string device; // this rank's device
  int threads = 0; // CPU threads for this rank's math (0: all usable)
};

// Reads the launcher's environment. Not launched: one process, `device` and
// `threads` as given. Launched: device auto/cuda becomes cuda:<local rank>
// (cpu without CUDA), that GPU becomes the current device, threads 0 becomes
// the usable cores / ranks on the node, and the group is joined. Throws
// UsageError for a bad backend or timeout, EnvError naming the master when
// the rendezvous fails.
Job join_job(const JobOptions& options, std::string device, int threads);

} // namespace hotloop::parallel
