#pragma once
// Which of the processes NVML lists on a GPU is this one. NVML gives pids as
// the driver sees them, in the host's PID namespace; inside a container with
// a PID namespace of its own, getpid() and /proc number processes
// differently, so comparing pids would list a run as "another process" on
// its own GPU (and /proc/PID/comm would name some unrelated process). There,
// this process is matched by the GPU memory it holds, or not at all: the
// answer is then "cannot tell", never a process blamed.

#include <cstdint>
#include <string>
#include <vector>

#include "hotloop/env/gpu_probe.h"

namespace hotloop::env {

// Whether this process sees the host's PID namespace (the initial one:
// /proc/self/ns/pid is its inode, PROC_PID_INIT_INO), so that NVML's pids
// are its pids. Read once.
bool pids_are_the_hosts();

struct ProcessIdentity {
  unsigned int pid = 0; // getpid()
  bool host_pids = true; // pids_are_the_hosts()
  // This process holds a CUDA context on the GPU in question (a training
  // run on it: then it is one of the processes NVML lists).
  bool on_this_gpu = false;
  // The memory LibTorch's allocator reserved there (NVML's figure for the
  // process is this plus the context's own); 0 when unknown.
  std::uint64_t reserved_bytes = 0;
};

// This process, as the identity above (reserved_bytes and on_this_gpu as
// the caller knows them).
ProcessIdentity this_process(bool on_this_gpu, std::uint64_t reserved_bytes);

struct OtherProcesses {
  std::vector<GpuProcess> processes; // on the GPU, not this process
  // Why the others cannot be told apart from this process (then none are
  // listed); "" when they could be.
  std::string unknown;
};

OtherProcesses other_processes(
    const std::vector<GpuProcess>& listed,
    const ProcessIdentity& me);

} // namespace hotloop::env
