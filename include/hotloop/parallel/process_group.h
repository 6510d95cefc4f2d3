#pragma once
// A data-parallel job's process group on PyTorch's c10d: a TCPStore at the
// master for the rendezvous (rank 0 hosts it), then Gloo (CPU tensors) or
// NCCL (CUDA tensors). The collectives the trainer needs, with failures turned
// into errors that name this rank, the collective and the ranks that stopped
// reporting with their last step and phase, never a silent hang: every
// collective gives up after the group's timeout.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/parallel/dist_env.h"
#include "hotloop/parallel/rank_status.h"

namespace hotloop::parallel {

enum class Backend { Gloo, Nccl };

struct GroupOptions {
  Backend backend = Backend::Gloo;
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

// NCCL's watchdog timeout for a group whose collectives time out after
// `timeout`: that plus a tenth of it, at least 30 s more, so that the host's
// own timed wait on the per-step agreement (which names the ranks that
// stopped) ends first.
std::chrono::milliseconds nccl_watchdog_timeout(
    std::chrono::milliseconds timeout);

class ProcessGroup {
 public:
  // Joins the job described by `env`. Throws EnvError naming the master when
  // the rendezvous fails or times out.
  static std::shared_ptr<ProcessGroup> create(
      const DistEnv& env,
      const GroupOptions& options);
  ~ProcessGroup();

  int rank() const;
  int size() const;
  const GroupOptions& options() const;

  // A second group of the same ranks, with connections of its own (its
  // `purpose` names it in the store): its collectives match across ranks
  // among themselves, in their own order, and neither queue behind this
  // group's nor are ordered with them. Made once per purpose (a rendezvous,
  // which every rank reaches in the same order: the first call for it) and
  // kept with this group: later calls return it. Failures name the ranks as
  // this one's do.
  std::shared_ptr<ProcessGroup> sibling(const std::string& purpose);

  // Rank 0's values into every rank's tensors (in place).
  void broadcast(std::vector<at::Tensor>& tensors, const std::string& phase);
  // Starts summing `tensor` over ranks in place and returns without waiting;
  // the returned function waits (the group's timeout) and throws Error as
  // the other collectives do. Collectives match across ranks by the order
  // they are started in.
  std::function<void()> start_allreduce_sum(
      at::Tensor tensor,
      const std::string& phase);
  // Starts summing `input` (world size x the shard's elements) over ranks
  // and leaving this rank's part of the sum, elements [rank x n, (rank + 1)
  // x n), in `output` (n elements); returns the wait, as above.
  std::function<void()> start_reduce_scatter_sum(
      at::Tensor input,
      at::Tensor output,
      const std::string& phase);
  // Starts gathering every rank's `input` (n elements) into `output` (world
  // size x n, rank r's at r x n); `input` may be rank's own part of
  // `output` (in place). Returns the wait, as above.
  std::function<void()> start_allgather(
      at::Tensor input,
      at::Tensor output,
      const std::string& phase);
  // `tensor` becomes its sum over ranks (in place), waited for.
  void allreduce_sum_(at::Tensor& tensor, const std::string& phase);
  // The element-wise sum over ranks (small vectors: per-rank figures).
  std::vector<double> allreduce_sum(
      std::vector<double> values,
      const std::string& phase);
  // The largest of the ranks' values (agreement: one all-reduce).
  std::int64_t allreduce_max(std::int64_t value, const std::string& phase);
  void barrier(const std::string& phase);

  // What this rank is doing, published twice a second (rank_status.h) so
  // that a failure on another rank names this one's last step and phase.
  void set_status(std::int64_t step, Phase phase);

 private:
  ProcessGroup();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::parallel
