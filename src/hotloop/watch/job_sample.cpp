#include "hotloop/watch/job_sample.h"

#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "hotloop/env/nvml_library.h"

namespace hotloop::watch {

namespace {

using nvml::call;
using nvml::kSuccess;

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

std::optional<unsigned int> read_uint(
    nvml::DeviceGetUintFn fn,
    nvml::Device d) {
  unsigned int v = 0;
  return call(fn, d, &v) == kSuccess ? std::optional<unsigned int>(v)
                                     : std::nullopt;
}

std::uint64_t now_us() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
}

} // namespace

std::set<unsigned int> visible_gpus(
    const std::string& cuda_visible_devices,
    const std::vector<std::string>& uuids) {
  std::set<unsigned int> out;
  std::stringstream in(cuda_visible_devices);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(' '));
    if (item.empty()) {
      continue;
    }
    if (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) {
      for (unsigned int i = 0; i < uuids.size(); ++i) {
        if (uuids[i].rfind(item, 0) == 0) {
          out.insert(i);
        }
      }
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || v < 0) {
      break; // CUDA stops at the first entry it cannot read
    }
    if (static_cast<std::size_t>(v) < uuids.size()) {
      out.insert(static_cast<unsigned int>(v));
    }
  }
  return out;
}

struct JobSampler::Impl {
  JobSamplerOptions options;
  std::unique_ptr<nvml::Library> nvml;
  std::unique_ptr<telemetry::GpmSampler> gpm; // freed before nvml closes
  std::string nvml_error;
  RateTracker rates;
  std::optional<HostTicks> host_before;
  std::map<unsigned int, std::uint64_t> last_seen_us; // per GPU index
  double last_elapsed = 0;
  bool first = true;

  ~Impl() {
    gpm.reset();
  }

  // Per-process SM share on GPU `index` since the previous reading: the
  // mean of each pid's samples.
  std::optional<std::map<unsigned int, double>> process_sm(unsigned int index) {
    const auto& fn = nvml->fn();
    nvml::Device d = nullptr;
    if (fn.device_get_process_utilization == nullptr ||
        call(fn.device_get_handle_by_index, index, &d) != kSuccess) {
      return std::nullopt;
    }
    const std::uint64_t since = last_seen_us.count(index) != 0
        ? last_seen_us[index]
        : now_us() - 2'000'000;
    unsigned int count = 0;
    nvml::Return rc =
        fn.device_get_process_utilization(d, nullptr, &count, since);
    std::map<unsigned int, double> share;
    if (rc == nvml::kErrorNotFound) {
      return share; // no process ran a kernel since
    }
    if (rc != nvml::kErrorInsufficientSize && rc != kSuccess) {
      return std::nullopt;
    }
    std::vector<nvml::ProcessUtilizationSample> buf(count + 8);
    count = static_cast<unsigned int>(buf.size());
    rc = fn.device_get_process_utilization(d, buf.data(), &count, since);
    if (rc == nvml::kErrorNotFound) {
      return share;
    }
    if (rc != kSuccess) {
      return std::nullopt;
    }
    std::map<unsigned int, std::pair<double, int>> sums;
    std::uint64_t newest = since;
    for (unsigned int i = 0; i < count; ++i) {
      auto& [sum, n] = sums[buf[i].pid];
      sum += buf[i].smUtil;
      ++n;
      newest = std::max<std::uint64_t>(newest, buf[i].timeStamp);
    }
    last_seen_us[index] = newest;
    for (const auto& [pid, sn] : sums) {
      share[pid] = sn.first / sn.second;
    }
    return share;
  }
};

JobSampler::JobSampler(JobSamplerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  try {
    impl_->nvml = nvml::Library::open(
        impl_->options.nvml_library.empty() ? nvml::default_library_path()
                                            : impl_->options.nvml_library);
    impl_->gpm = std::make_unique<telemetry::GpmSampler>(*impl_->nvml);
  } catch (const nvml::OpenError& e) {
    impl_->nvml_error = e.what();
  }
}

JobSampler::~JobSampler() = default;

bool JobSampler::nvml_loaded() const {
  return impl_->nvml != nullptr;
}

JobSample JobSampler::sample(double elapsed_s) {
  Impl& m = *impl_;
  JobSample s;
  s.unix_time = std::chrono::duration<double>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  s.elapsed_s = elapsed_s;
  s.main_pid = m.options.root_pid;
  s.cuda_visible_devices = m.options.cuda_visible_devices;
  s.host_cores =
      static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  const double dt = m.first ? 0 : elapsed_s - m.last_elapsed;

  // The tree: the main process first.
  std::vector<ProcessStat> tree = m.options.children_of_self
      ? read_tree(static_cast<int>(::getpid()), false)
      : read_tree(m.options.root_pid, true);
  std::stable_partition(tree.begin(), tree.end(), [&](const ProcessStat& p) {
    return p.pid == m.options.root_pid;
  });
  const auto rates = m.rates.update(tree, dt);
  std::set<unsigned int> tree_pids;
  for (const auto& p : tree) {
    tree_pids.insert(static_cast<unsigned int>(p.pid));
    JobProcess j;
    j.pid = p.pid;
    j.ppid = p.ppid;
    j.name = p.name;
    j.command = p.command;
    j.state = p.state;
    j.rss_bytes = p.rss_bytes;
    j.threads = p.threads;
    j.running_threads = p.running_threads;
    if (const auto r = rates.find(p.pid); r != rates.end()) {
      j.cpu_percent = r->second.cpu_percent;
      j.read_bytes_per_s = r->second.read_bytes_per_s;
      j.main_thread_percent = r->second.main_thread_percent;
      j.main_runnable_percent = r->second.main_runnable_percent;
    }
    s.processes.push_back(std::move(j));
  }

  // The machine.
  const auto host = read_host_ticks();
  if (host && m.host_before && host->total > m.host_before->total) {
    const auto total = static_cast<double>(host->total - m.host_before->total);
    s.host_cpu_percent =
        100.0 * static_cast<double>(host->busy - m.host_before->busy) / total;
    s.host_iowait_percent = 100.0 *
        static_cast<double>(host->iowait - m.host_before->iowait) / total;
  }
  m.host_before = host;

  // The GPUs the job holds memory on or was given.
  s.nvml = m.nvml != nullptr;
  s.nvml_error = m.nvml_error;
  if (m.nvml) {
    auto gpus = telemetry::sample_gpus(*m.nvml, m.gpm.get());
    s.gpus_on_machine = static_cast<int>(gpus.size());
    std::vector<std::string> uuids;
    for (const auto& g : gpus) {
      uuids.push_back(g.uuid);
    }
    const std::set<unsigned int> given = m.options.cuda_visible_devices
        ? visible_gpus(*m.options.cuda_visible_devices, uuids)
        : std::set<unsigned int>{};
    s.cuda_hides_all = m.options.cuda_visible_devices && given.empty();
    for (auto& g : gpus) {
      JobGpu j;
      j.given = given.count(g.index) != 0;
      if (g.processes) {
        for (const auto& p : *g.processes) {
          if (tree_pids.count(p.pid) != 0) {
            j.held = true;
            j.job_memory_bytes += p.used_bytes;
            j.job_processes.push_back(p);
          } else {
            j.other_processes.push_back(p);
          }
        }
      }
      // Read even for GPUs the job does not use (yet), so that the next
      // reading's interval starts now.
      const auto sm = m.process_sm(g.index);
      if (!j.given && !j.held) {
        continue;
      }
      if (sm) {
        double job = 0;
        double others = 0;
        for (const auto& [pid, v] : *sm) {
          (tree_pids.count(pid) != 0 ? job : others) += v;
        }
        j.job_sm_percent = std::min(100.0, job);
        j.others_sm_percent = std::min(100.0, others);
      }
      nvml::Device d = nullptr;
      const auto& fn = m.nvml->fn();
      if (call(fn.device_get_handle_by_index, g.index, &d) == kSuccess) {
        j.pcie_gen = read_uint(fn.device_get_curr_pcie_link_generation, d);
        j.pcie_max_gen = read_uint(fn.device_get_max_pcie_link_generation, d);
        j.pcie_width = read_uint(fn.device_get_curr_pcie_link_width, d);
        j.pcie_max_width = read_uint(fn.device_get_max_pcie_link_width, d);
      }
      j.gpu = std::move(g);
      s.gpus.push_back(std::move(j));
    }
  }
  m.first = false;
  m.last_elapsed = elapsed_s;
  return s;
}

nlohmann::json to_json(const JobSample& s) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : s.gpus) {
    nlohmann::json j = telemetry::to_json(g.gpu);
    j["job_sm_percent"] = opt(g.job_sm_percent);
    j["others_sm_percent"] = opt(g.others_sm_percent);
    j["job_memory_bytes"] = g.job_memory_bytes;
    j["given"] = g.given;
    j["held"] = g.held;
    j["pcie_gen"] = opt(g.pcie_gen);
    j["pcie_max_gen"] = opt(g.pcie_max_gen);
    j["pcie_width"] = opt(g.pcie_width);
    j["pcie_max_width"] = opt(g.pcie_max_width);
    gpus.push_back(std::move(j));
  }
  nlohmann::json procs = nlohmann::json::array();
  double cpu = 0;
  double read = 0;
  std::uint64_t rss = 0;
  int threads = 0;
  int running = 0;
  for (const auto& p : s.processes) {
    procs.push_back(
        {{"pid", p.pid},
         {"ppid", p.ppid},
         {"name", p.name},
         {"state", std::string(1, p.state)},
         {"cpu_percent", p.cpu_percent},
         {"main_thread_percent", opt(p.main_thread_percent)},
         {"main_runnable_percent", opt(p.main_runnable_percent)},
         {"rss_bytes", p.rss_bytes},
         {"read_bytes_per_s", p.read_bytes_per_s},
         {"threads", p.threads},
         {"running_threads", p.running_threads}});
    cpu += p.cpu_percent;
    read += p.read_bytes_per_s;
    rss += p.rss_bytes;
    threads += p.threads;
    running += p.running_threads;
  }
  return {
      {"unix_time", s.unix_time},
      {"elapsed_s", s.elapsed_s},
      {"gpus", gpus},
      {"job",
       {{"main_pid", s.main_pid},
        {"processes", s.processes.size()},
        {"cpu_percent", cpu},
        {"rss_bytes", rss},
        {"read_bytes_per_s", read},
        {"threads", threads},
        {"running_threads", running}}},
      {"processes", procs},
      {"host",
       {{"cpu_percent", opt(s.host_cpu_percent)},
        {"iowait_percent", opt(s.host_iowait_percent)},
        {"cores", s.host_cores}}}};
}

} // namespace hotloop::watch
