#pragma once
// Facts about the host that decide how fast a GPU can be fed: CPUs vs
// LibTorch's threads, memory, /dev/shm, the locked-memory limit, the CPU
// frequency governor, and free disk for runs.

#include <cstdint>
#include <string>
#include <vector>

#include "hotloop/env/probed.h"

namespace hotloop::env {

struct HostFacts {
  std::string cpu_model; // "" when /proc/cpuinfo has none
  unsigned int logical_cpus = 0; // online CPUs
  unsigned int usable_cpus =
      0; // CPUs this process may run on (affinity, cgroup cpusets)
  unsigned int physical_cores =
      0; // distinct (package, core) pairs among the online CPUs; 0 if unknown
  int torch_intra_op_threads = 0; // at::get_num_threads()
  Probed<std::uint64_t> memory_total_bytes;
  Probed<std::uint64_t> memory_available_bytes;
  Probed<std::uint64_t> shm_total_bytes; // /dev/shm
  Probed<std::uint64_t> shm_free_bytes;
  Probed<std::uint64_t> memlock_limit_bytes; // RLIMIT_MEMLOCK soft limit;
                                             // UINT64_MAX when unlimited
  Probed<std::vector<std::string>>
      cpu_governors; // distinct scaling governors, e.g. {"performance"}
  std::string run_dir; // where runs are written (the nearest existing ancestor
                       // is measured)
  Probed<std::uint64_t> run_dir_free_bytes;
};

struct HostProbeOptions {
  std::string run_dir = "runs";
  std::string proc_dir = "/proc"; // tests point these at a prepared tree
  std::string sys_cpu_dir = "/sys/devices/system/cpu";
  std::string shm_dir = "/dev/shm";
};

HostFacts probe_host(const HostProbeOptions& options);

} // namespace hotloop::env
