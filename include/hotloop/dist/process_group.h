#pragma once
// A data-parallel job's process group on PyTorch's c10d: a TCPStore at the
// master for the rendezvous (rank 0 hosts it), then Gloo (CPU tensors) or
// NCCL (CUDA tensors). The collectives the trainer needs, with failures turned
// into errors that name this rank and the phase, never a silent hang: every
// collective gives up after the group's timeout.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/dist/dist_env.h"

namespace hotloop::dist {

enum class Backend { Gloo, Nccl };

struct GroupOptions {
  Backend backend = Backend::Gloo;
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  std::size_t bucket_bytes = 25u << 20; // gradients all-reduced per bucket
};

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

  // Rank 0's values into every rank's tensors (in place).
  void broadcast(std::vector<at::Tensor>& tensors, const std::string& phase);
  // Every rank's tensors become the mean over ranks (in place), in buckets
  // of about bucket_bytes, each flattened and all-reduced asynchronously.
  void allreduce_mean(
      const std::vector<at::Tensor>& tensors,
      const std::string& phase);
  // The element-wise sum over ranks (small vectors: per-rank figures).
  std::vector<double> allreduce_sum(
      std::vector<double> values,
      const std::string& phase);
  // The largest of the ranks' values (agreement: one all-reduce).
  std::int64_t allreduce_max(std::int64_t value, const std::string& phase);
  void barrier(const std::string& phase);

 private:
  ProcessGroup();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::dist
