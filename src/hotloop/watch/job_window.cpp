#include "hotloop/watch/job_window.h"

#include <algorithm>
#include <limits>

#include "hotloop/telemetry/sampler.h"

namespace hotloop::watch {

void WindowFold::add(const JobSample& s) {
  samples_.push_back(s);
}

void WindowFold::add_steps(const std::vector<StepEvent>& steps) {
  for (const auto& e : steps) {
    if (rank_ < 0 || e.rank < rank_) {
      rank_ = e.rank;
      steps_ = 0;
      first_step_time_ = e.unix_time;
    }
    if (e.rank != rank_) {
      continue;
    }
    if (steps_++ == 0) {
      first_step_time_ = e.unix_time;
    }
    last_step_time_ = e.unix_time;
  }
}

namespace {

using Samples = std::vector<JobSample>;

// The job's GPU: the one its processes held the most memory on; else the
// first it was given. Sets w.holds_gpu.
std::optional<unsigned int> job_gpu(
    const Samples& samples,
    telemetry::JobWindowInput& w) {
  std::map<unsigned int, std::uint64_t> held;
  std::optional<unsigned int> given;
  for (const auto& s : samples) {
    for (const auto& g : s.gpus) {
      if (g.held) {
        held[g.gpu.index] = std::max(held[g.gpu.index], g.job_memory_bytes + 1);
      }
      if (g.given && !given) {
        given = g.gpu.index;
      }
    }
  }
  w.holds_gpu = !held.empty();
  std::optional<unsigned int> chosen = given;
  if (!held.empty()) {
    chosen = std::max_element(held.begin(), held.end(), [](auto& a, auto& b) {
               return a.second < b.second;
             })->first;
  }
  return chosen;
}

// GPU `chosen`'s means over the window, the job's share of it, its link.
void fold_gpu(
    const Samples& samples,
    unsigned int chosen,
    telemetry::JobWindowInput& w) {
  w.gpu_index = chosen;
  telemetry::Window window;
  double job_sm = 0;
  double others_sm = 0;
  std::size_t sm_n = 0;
  for (const auto& s : samples) {
    for (const auto& g : s.gpus) {
      if (g.gpu.index != chosen) {
        continue;
      }
      telemetry::Sample one;
      one.gpus = {g.gpu};
      // watch is not on the GPU; the job's processes are set below.
      telemetry::accumulate(window, one, g.gpu.uuid, env::ProcessIdentity{});
      if (g.job_sm_percent) {
        job_sm += *g.job_sm_percent;
        others_sm += g.others_sm_percent.value_or(0);
        ++sm_n;
      }
      w.job_memory = g.job_memory_bytes;
      w.gpu_index = g.gpu.index;
      w.pcie_gen = g.pcie_gen;
      w.pcie_max_gen = g.pcie_max_gen;
      w.pcie_width = g.pcie_width;
      w.pcie_max_width = g.pcie_max_width;
      if (window.gpu) {
        window.gpu->other_processes = g.other_processes;
      }
    }
  }
  window = telemetry::finish(window);
  w.gpu = window.gpu;
  if (sm_n > 0) {
    w.job_sm_mean = job_sm / static_cast<double>(sm_n);
    w.others_sm_mean = others_sm / static_cast<double>(sm_n);
  }
}

// The host and the job's processes: the first sample only set the rates'
// baseline when it opened the run, so means are over samples that have rates.
void fold_host(const Samples& samples, telemetry::JobWindowInput& w) {
  std::map<int, std::pair<double, int>> cpu; // pid -> (sum, samples)
  std::map<int, std::pair<double, int>> runnable;
  std::map<int, std::string> names;
  double host = 0;
  double iowait = 0;
  double read = 0;
  int host_n = 0;
  for (const auto& s : samples) {
    for (const auto& p : s.processes) {
      auto& [sum, n] = cpu[p.pid];
      sum += p.cpu_percent;
      ++n;
      names[p.pid] = p.name;
      if (p.main_runnable_percent) {
        runnable[p.pid].first += *p.main_runnable_percent;
        ++runnable[p.pid].second;
      }
      read += p.read_bytes_per_s;
    }
    if (s.host_cpu_percent) {
      host += *s.host_cpu_percent;
      iowait += s.host_iowait_percent.value_or(0);
      ++host_n;
    }
  }
  const auto n = static_cast<double>(samples.size());
  w.read_bytes_per_s = read / n;
  if (host_n > 0) {
    w.host_cpu_mean = host / host_n;
    w.host_iowait_mean = iowait / host_n;
  }
  for (const auto& [pid, sn] : cpu) {
    const double mean = sn.first / sn.second;
    const auto r = runnable.find(pid);
    const double run = r == runnable.end()
        ? std::numeric_limits<double>::quiet_NaN()
        : r->second.first / r->second.second;
    if (pid == w.main_pid) {
      w.main_cpu_mean = mean;
      w.main_runnable_mean = run;
      w.main_name = names[pid];
    } else {
      w.helpers.push_back({pid, names[pid], mean, run});
    }
  }
  std::sort(w.helpers.begin(), w.helpers.end(), [](auto& a, auto& b) {
    return a.cpu_mean > b.cpu_mean;
  });
}

} // namespace

telemetry::JobWindowInput WindowFold::input(
    std::vector<std::uint64_t>& memory_history) const {
  telemetry::JobWindowInput w;
  w.samples = samples_.size();
  if (samples_.empty()) {
    return w;
  }
  const JobSample& last = samples_.back();
  w.from_s = samples_.front().elapsed_s;
  w.to_s = last.elapsed_s;
  w.nvml = last.nvml;
  w.nvml_error = last.nvml_error;
  w.gpus_on_machine = last.gpus_on_machine;
  w.cuda_hidden = last.cuda_hides_all;
  w.main_pid = last.main_pid;
  w.host_cores = last.host_cores;

  if (const std::optional<unsigned int> chosen = job_gpu(samples_, w)) {
    fold_gpu(samples_, *chosen, w);
  }
  memory_history.push_back(w.job_memory);
  w.memory_history = memory_history;
  fold_host(samples_, w);
  w.steps = steps_;
  const double span =
      std::max(w.to_s - w.from_s, last_step_time_ - first_step_time_);
  w.steps_per_s = span > 0 ? static_cast<double>(steps_) / span : 0;
  return w;
}

} // namespace hotloop::watch
