#include "hotloop/env/host_probe.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "hotloop/core/cpus.h"

namespace hotloop::env {
namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) {
    return {};
  }
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

struct CpuInfo {
  std::string model;
  unsigned int logical = 0;
  unsigned int physical_cores = 0;
};

CpuInfo read_cpuinfo(const std::string& path) {
  CpuInfo info;
  std::ifstream in(path);
  std::string line;
  std::string physical_id = "0";
  std::set<std::pair<std::string, std::string>> cores;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++info.logical;
    } else if (key == "model name" && info.model.empty()) {
      info.model = value;
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      cores.emplace(physical_id, value);
    }
  }
  info.physical_cores = static_cast<unsigned int>(cores.size());
  return info;
}

// Value in bytes of a "Key:   123 kB" line of /proc/meminfo.
Probed<std::uint64_t> meminfo_field(
    const std::string& path,
    const std::string& key) {
  std::ifstream in(path);
  if (!in) {
    return Probed<std::uint64_t>::missing("cannot read " + path);
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      std::uint64_t kib = 0;
      fields >> kib;
      return Probed<std::uint64_t>::of(kib * 1024);
    }
  }
  return Probed<std::uint64_t>::missing(key + " not in " + path);
}

// statvfs on `path` or, when it does not exist yet, its nearest existing
// ancestor.
bool stat_fs(fs::path path, struct statvfs* out) {
  std::error_code ec;
  path = fs::absolute(path, ec);
  while (!path.empty()) {
    if (fs::exists(path, ec)) {
      return ::statvfs(path.c_str(), out) == 0;
    }
    if (path == path.parent_path()) {
      break;
    }
    path = path.parent_path();
  }
  return false;
}

Probed<std::vector<std::string>> read_governors(
    const std::string& sys_cpu_dir) {
  std::set<std::string> governors;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sys_cpu_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
        name.find_first_not_of("0123456789", 3) != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "cpufreq" / "scaling_governor");
    std::string governor;
    if (in && std::getline(in, governor) && !trim(governor).empty()) {
      governors.insert(trim(governor));
    }
  }
  if (governors.empty()) {
    return Probed<std::vector<std::string>>::missing(
        "no cpufreq scaling governor exposed (usual in VMs and containers)");
  }
  return Probed<std::vector<std::string>>::of(
      {governors.begin(), governors.end()});
}

} // namespace

HostFacts probe_host(const HostProbeOptions& options) {
  HostFacts h;
  const CpuInfo cpu = read_cpuinfo(options.proc_dir + "/cpuinfo");
  h.cpu_model = cpu.model;
  h.logical_cpus = cpu.logical;
  h.physical_cores = cpu.physical_cores;
  h.usable_cpus = usable_cpus();
  h.torch_intra_op_threads = at::get_num_threads();

  h.memory_total_bytes =
      meminfo_field(options.proc_dir + "/meminfo", "MemTotal");
  h.memory_available_bytes =
      meminfo_field(options.proc_dir + "/meminfo", "MemAvailable");

  struct statvfs shm {};
  if (::statvfs(options.shm_dir.c_str(), &shm) == 0) {
    h.shm_total_bytes =
        Probed<std::uint64_t>::of(std::uint64_t{shm.f_blocks} * shm.f_frsize);
    h.shm_free_bytes =
        Probed<std::uint64_t>::of(std::uint64_t{shm.f_bavail} * shm.f_frsize);
  } else {
    h.shm_total_bytes = h.shm_free_bytes =
        Probed<std::uint64_t>::missing(options.shm_dir + " is not mounted");
  }

  struct rlimit memlock {};
  if (::getrlimit(RLIMIT_MEMLOCK, &memlock) == 0) {
    h.memlock_limit_bytes = Probed<std::uint64_t>::of(
        memlock.rlim_cur == RLIM_INFINITY
            ? std::numeric_limits<std::uint64_t>::max()
            : static_cast<std::uint64_t>(memlock.rlim_cur));
  } else {
    h.memlock_limit_bytes =
        Probed<std::uint64_t>::missing("getrlimit(RLIMIT_MEMLOCK) failed");
  }

  h.cpu_governors = read_governors(options.sys_cpu_dir);

  h.run_dir = options.run_dir;
  struct statvfs disk {};
  if (stat_fs(options.run_dir, &disk)) {
    h.run_dir_free_bytes =
        Probed<std::uint64_t>::of(std::uint64_t{disk.f_bavail} * disk.f_frsize);
  } else {
    h.run_dir_free_bytes =
        Probed<std::uint64_t>::missing("cannot stat " + options.run_dir);
  }
  return h;
}

} // namespace hotloop::env
