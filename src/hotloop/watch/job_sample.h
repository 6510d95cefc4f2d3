#pragma once
// One reading of a watched job: the GPUs it uses (the whole GPU from NVML,
// and the job's own share of SM time and memory next to other processes'),
// every process of its tree (CPU, memory, disk reads, threads) and the
// machine's CPU and I/O wait. `JobSampler` takes them; it never throws once
// constructed.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/telemetry/samples.h"
#include "hotloop/watch/process_tree.h"

namespace hotloop::nvml {
class Library;
}

namespace hotloop::watch {

struct JobGpu {
  telemetry::GpuSample gpu; // the whole GPU
  // The job's processes' share of SM time over the interval (NVML's
  // per-process utilization, summed); none: the driver does not say.
  std::optional<double> job_sm_percent;
  std::optional<double> others_sm_percent;
  std::uint64_t job_memory_bytes = 0;
  std::vector<env::GpuProcess> job_processes;
  std::vector<env::GpuProcess> other_processes;
  bool given = false; // named by the job's CUDA_VISIBLE_DEVICES
  bool held = false; // a process of the job holds memory on it
  std::optional<unsigned int> pcie_gen, pcie_max_gen, pcie_width,
      pcie_max_width;
};

struct JobProcess {
  int pid = 0;
  int ppid = 0;
  std::string name;
  std::string command;
  char state = '?';
  double cpu_percent = 0; // of one core
  // Its main thread on a core / runnable (on one or waiting), percent.
  std::optional<double> main_thread_percent;
  std::optional<double> main_runnable_percent;
  std::uint64_t rss_bytes = 0;
  double read_bytes_per_s = 0;
  int threads = 0;
  int running_threads = 0;
};

struct JobSample {
  double unix_time = 0;
  double elapsed_s = 0; // since watch started
  std::vector<JobGpu> gpus; // the GPUs the job uses or was given
  std::vector<JobProcess> processes; // main process first
  int main_pid = 0;
  std::optional<double> host_cpu_percent; // all cores
  std::optional<double> host_iowait_percent;
  int host_cores = 1;
  // NVML's state: loaded (GPUs listed), or why not.
  bool nvml = false;
  std::string nvml_error;
  int gpus_on_machine = 0;
  std::optional<std::string> cuda_visible_devices; // the job's
  bool cuda_hides_all = false; // it names none of the machine's GPUs
};

struct JobSamplerOptions {
  std::string nvml_library; // "": nvml::default_library_path()
  int root_pid = 0; // the job's main process
  // Follow watch's own children instead of root's alone (a started job:
  // orphans re-parented to watch, a subreaper, stay in the tree).
  bool children_of_self = false;
  std::optional<std::string> cuda_visible_devices;
};

class JobSampler {
 public:
  explicit JobSampler(JobSamplerOptions options);
  ~JobSampler();
  JobSampler(const JobSampler&) = delete;
  JobSampler& operator=(const JobSampler&) = delete;

  // A reading `dt_s` after the previous one (the first only sets the
  // baseline for rates: its processes carry no CPU use).
  JobSample sample(double elapsed_s);
  bool nvml_loaded() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The GPUs named by CUDA_VISIBLE_DEVICES (indices or UUID prefixes), as
// NVML indices; an empty value names none. `uuids` lists NVML's GPUs in
// order.
std::set<unsigned int> visible_gpus(
    const std::string& cuda_visible_devices,
    const std::vector<std::string>& uuids);

nlohmann::json to_json(const JobSample& s);

} // namespace hotloop::watch
