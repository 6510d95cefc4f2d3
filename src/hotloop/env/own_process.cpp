#include "hotloop/env/own_process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace hotloop::env {

namespace {

// The initial PID namespace's inode number (include/linux/proc_ns.h).
constexpr ino_t kInitialPidNamespace = 0xEFFFFFFCU;
// NVML's per-process figure is the allocator's reserved memory plus the CUDA
// context (its code, stacks, cuBLAS/cuDNN workspaces): at most this much
// more, for the match by memory.
constexpr std::uint64_t kContextAtMost = 4ULL << 30;

} // namespace

bool pids_are_the_hosts() {
  static const bool host = [] {
    struct stat st {};
    // Unreadable (an old kernel, a sandbox): assume the host's, as before.
    return ::stat("/proc/self/ns/pid", &st) != 0 ||
        st.st_ino == kInitialPidNamespace;
  }();
  return host;
}

ProcessIdentity this_process(bool on_this_gpu, std::uint64_t reserved_bytes) {
  ProcessIdentity me;
  me.pid = static_cast<unsigned int>(::getpid());
  me.host_pids = pids_are_the_hosts();
  me.on_this_gpu = on_this_gpu;
  me.reserved_bytes = reserved_bytes;
  return me;
}

OtherProcesses other_processes(
    const std::vector<GpuProcess>& listed,
    const ProcessIdentity& me) {
  OtherProcesses out;
  if (me.host_pids || !me.on_this_gpu) {
    // Comparable pids; or this process is not on the GPU, so every process
    // listed is another one.
    for (const auto& p : listed) {
      if (!me.host_pids || p.pid != me.pid) {
        out.processes.push_back(p);
      }
    }
    return out;
  }
  // A container's PID namespace, and this process is one of those listed.
  if (listed.size() <= 1) {
    return out; // the only one is this one
  }
  std::vector<std::size_t> matches;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const std::uint64_t used = listed[i].used_bytes;
    if (used > 0 && used >= me.reserved_bytes &&
        used - me.reserved_bytes <= kContextAtMost) {
      matches.push_back(i);
    }
  }
  if (me.reserved_bytes > 0 && matches.size() == 1) {
    for (std::size_t i = 0; i < listed.size(); ++i) {
      if (i != matches.front()) {
        out.processes.push_back(listed[i]);
      }
    }
    return out;
  }
  out.unknown = fmt::format(
      "{} processes hold memory on this GPU, this run among them; inside a container with its own PID namespace NVML's pids are the host's, and their memory does not tell which one is this run (run nvidia-smi on the host to see them)",
      listed.size());
  return out;
}

} // namespace hotloop::env
