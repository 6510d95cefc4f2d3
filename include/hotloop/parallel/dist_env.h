#pragma once
// Where this process sits in a data-parallel job, read from the environment
// the launchers already set: torchrun (and `hotloop launch`) set RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; srun sets SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID and SLURM_JOB_NODELIST (the first host is the
// master).

#include <functional>
#include <optional>
#include <string>

namespace hotloop::parallel {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // Ranks on this node (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE): they share
  // its CPU cores.
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process"; // torchrun, slurm, single process
  // HOTLOOP_RANK_STATUS_FILE: where `hotloop launch` reads this rank's last
  // step and phase if it dies (empty: not under hotloop launch).
  std::string status_file;
  bool distributed() const {
    return world_size > 1;
  }
  // A launcher set the variables (a job of one rank counts: it still runs
  // through a process group, e.g. to prove the NCCL path).
  bool launched() const {
    return source != "single process";
  }
};

// Reads the job's environment through `get` (std::getenv by default). Throws
// UsageError naming the variable for a value that is not a number or out of
// range, or a half-set job (RANK without WORLD_SIZE).
DistEnv read_dist_env(
    const std::function<const char*(const char*)>& get = nullptr);

// The first host of a Slurm node list: "gpu[07-09,12],cpu01" -> "gpu07".
std::string first_slurm_host(const std::string& nodelist);

} // namespace hotloop::parallel
