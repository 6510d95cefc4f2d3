#include "hotloop/telemetry/job_diagnosis.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "hotloop/core/units.h"

namespace hotloop::telemetry {

namespace {

int rank(const std::string& verdict) {
  int i = 0;
  for (const char* v :
       {"cpu-only",
        "memory-near-full",
        "memory-growing",
        "input-bound",
        "host-bound",
        "throttled-thermal",
        "throttled-power",
        "throttled",
        "other-process",
        "pcie-narrowed",
        "under-used"}) {
    if (verdict == v) {
      return i;
    }
    ++i;
  }
  return 100;
}

// How much of a core a process wants: its CPU use, or its main thread's
// runnable time when that is higher (it waited for a core others held).
double demand(double cpu, double runnable) {
  return std::isnan(runnable) ? cpu : std::max(cpu, runnable);
}

std::string cpu_words(double cpu, double runnable) {
  return !std::isnan(runnable) && runnable > cpu + 10
      ? fmt::format(
            "{:.0f}% of a core, runnable {:.0f}% of the time", cpu, runnable)
      : fmt::format("{:.0f}% of a core", cpu);
}

std::string helper_list(const std::vector<HelperProcess>& helpers) {
  std::string out;
  int shown = 0;
  for (const auto& h : helpers) {
    if (++shown > 4) {
      out += ", ...";
      break;
    }
    out += fmt::format(
        "{}{} (pid {}) {}",
        out.empty() ? "" : ", ",
        h.name,
        h.pid,
        cpu_words(h.cpu_mean, h.runnable_mean));
  }
  return out;
}

// What the rules below read, worked out once from a window.
struct JobFacts {
  std::string when; // "10-20 s"
  std::string where; // "GPU 0, 10-20 s"
  double job_cpu = 0; // % of a core over the job's processes
  // The SM share the job's kernels had: its own when the driver tells it,
  // else the whole GPU's; and that in words.
  std::optional<double> sm;
  std::string sm_words;
  bool gpu_idle = false;
  std::vector<HelperProcess> saturated; // helpers at a full core
  bool main_saturated = false; // the main process's Python thread
  bool io_wait = false;
  // The main process doing work of its own: at least half a core (its
  // runnable time where known; on the CPU its math threads count too).
  bool main_busy = false;
};

JobFacts facts_of(const JobWindowInput& w, const JobDiagnosisOptions& o) {
  JobFacts f;
  f.when = fmt::format("{:.0f}-{:.0f} s", w.from_s, w.to_s);
  f.where = w.gpu ? fmt::format("GPU {}, {}", w.gpu_index, f.when) : f.when;
  f.job_cpu = w.main_cpu_mean;
  for (const auto& h : w.helpers) {
    f.job_cpu += h.cpu_mean;
  }
  if (w.holds_gpu && w.gpu) {
    f.sm = w.job_sm_mean ? *w.job_sm_mean : w.gpu->util_mean;
    f.sm_words = w.job_sm_mean
        ? fmt::format("the job's kernels ran {:.0f}% of the time", *f.sm)
        : fmt::format("the GPU was busy {:.0f}% of the time", *f.sm);
  }
  f.gpu_idle = f.sm && *f.sm < o.gpu_busy;
  for (const auto& h : w.helpers) {
    if (demand(h.cpu_mean, h.runnable_mean) >= o.core_saturated) {
      f.saturated.push_back(h);
    }
  }
  // A process's CPU use counts its other threads too: the main thread's own
  // runnable time where known.
  f.main_saturated = std::isnan(w.main_runnable_mean)
      ? w.main_cpu_mean >= o.core_saturated
      : w.main_runnable_mean >= o.core_saturated;
  f.io_wait = w.host_iowait_mean >= o.iowait;
  f.main_busy =
      std::max(
          w.main_cpu_mean,
          std::isnan(w.main_runnable_mean) ? 0.0 : w.main_runnable_mean) >= 50;
  return f;
}

using Findings = std::vector<Finding>;

// The job holds no GPU memory: why, as far as the window tells.
void cpu_only(const JobWindowInput& w, const JobFacts& f, Findings& out) {
  if (w.holds_gpu) {
    return;
  }
  std::string why;
  std::string fix;
  if (!w.nvml) {
    why = fmt::format(
        "no NVIDIA driver is visible ({})",
        w.nvml_error.empty() ? "NVML not loaded" : w.nvml_error);
    fix =
        "run it on a machine with an NVIDIA GPU and driver (hotloop doctor checks one); on this machine it can only use the CPU";
  } else if (w.gpus_on_machine == 0) {
    why = "the driver lists no GPU";
    fix = "hotloop doctor: the driver is loaded but sees no GPU";
  } else if (w.cuda_hidden) {
    why = fmt::format(
        "its CUDA_VISIBLE_DEVICES hides all {} GPU(s) of this machine",
        w.gpus_on_machine);
    fix =
        "unset CUDA_VISIBLE_DEVICES (or name a GPU: CUDA_VISIBLE_DEVICES=0) in the job's environment";
  } else {
    why = fmt::format(
        "it holds memory on none of the {} GPU(s) of this machine",
        w.gpus_on_machine);
    fix =
        "move the model and every batch to the GPU (model.to('cuda'), x.to('cuda')); check torch.cuda.is_available() in the job's own environment (a CPU-only torch wheel is the usual cause: hotloop doctor)";
  }
  out.push_back(
      {"cpu-only",
       fmt::format(
           "{}: the job runs on the CPU ({:.0f}% of a core over {} process(es)): {}",
           f.when,
           f.job_cpu,
           1 + w.helpers.size(),
           why),
       fix});
}

// Memory near the GPU's size, or growing window after window.
void memory(
    const JobWindowInput& w,
    const JobFacts& f,
    const JobDiagnosisOptions& o,
    Findings& out) {
  if (w.gpu) {
    const GpuWindow& g = *w.gpu;
    if (g.memory_total > 0 &&
        static_cast<double>(g.memory_used_last) >=
            o.memory_full * static_cast<double>(g.memory_total)) {
      out.push_back(
          {"memory-near-full",
           fmt::format(
               "{}: {} of {} in use ({} of it the job's)",
               f.where,
               format_bytes(g.memory_used_last),
               format_bytes(g.memory_total),
               format_bytes(w.job_memory)),
           "one larger batch or longer sequence from an out-of-memory error: a smaller batch with gradient accumulation, activation checkpointing, bf16; PyTorch's allocator caches freed blocks, so torch.cuda.memory_allocated() tells what is really used"});
    }
  }
  const auto& h = w.memory_history;
  if (grows_steadily(h, o.leak_windows, o.leak_growth)) {
    out.push_back(
        {"memory-growing",
         fmt::format(
             "{}: the job's GPU memory grew in each of the last {} windows, {} -> {}",
             f.where,
             o.leak_windows,
             format_bytes(h[h.size() - 1 - o.leak_windows]),
             format_bytes(h.back())),
         "something keeps tensors alive from step to step: accumulate the loss with loss.item() (not the tensor), do not keep outputs in lists, detach what you log; NVML sees the allocator's cache too, so check torch.cuda.memory_allocated()"});
  }
}

// The GPU waits on the input (helpers saturated, or the disk), or on the one
// Python thread that launches its work.
void input_or_host_bound(
    const JobWindowInput& w,
    const JobFacts& f,
    Findings& out) {
  if (f.gpu_idle && (!f.saturated.empty() || f.io_wait)) {
    std::string evidence = fmt::format("{}: {}", f.where, f.sm_words);
    if (!f.saturated.empty()) {
      evidence += fmt::format(
          " while {} of its {} helper process(es) were saturated: {}",
          f.saturated.size(),
          w.helpers.size(),
          helper_list(f.saturated));
    }
    if (f.io_wait) {
      evidence += fmt::format(
          "{}the machine waited on I/O {:.0f}% of the time (the job read {}/s)",
          f.saturated.empty() ? " while " : "; ",
          w.host_iowait_mean,
          format_bytes(static_cast<std::uint64_t>(w.read_bytes_per_s)));
    }
    out.push_back(
        {"input-bound",
         evidence,
         f.io_wait && f.saturated.empty()
             ? "the data comes off the disk too slowly: faster storage or a local copy, fewer larger files (WebDataset shards: hotloop pack), a page-cache-sized dataset held in memory"
             : "the loader cannot keep up: more DataLoader workers (num_workers, up to the cores free), cheaper decoding and augmentation (or on the GPU), pre-decoded data (hotloop pack), persistent_workers=True and pin_memory=True"});
  } else if (!w.holds_gpu && !f.saturated.empty() && !f.main_busy) {
    // On the CPU too the loader can be the limit: the main process waits
    // while its workers cannot keep up.
    out.push_back(
        {"input-bound",
         fmt::format(
             "{}: on the CPU, the main process {} (pid {}) was mostly waiting ({}) while {} of its {} helper process(es) were saturated: {}",
             f.when,
             w.main_name,
             w.main_pid,
             cpu_words(w.main_cpu_mean, w.main_runnable_mean),
             f.saturated.size(),
             w.helpers.size(),
             helper_list(f.saturated)),
         "the loader cannot keep up: more DataLoader workers (num_workers, up to the cores free), cheaper decoding and augmentation, pre-decoded data (hotloop pack), persistent_workers=True"});
  } else if (f.gpu_idle && f.main_saturated) {
    out.push_back(
        {"host-bound",
         fmt::format(
             "{}: {} while the main process {} (pid {}) used {}{}",
             f.where,
             f.sm_words,
             w.main_name,
             w.main_pid,
             cpu_words(w.main_cpu_mean, w.main_runnable_mean),
             w.helpers.empty()
                 ? std::string()
                 : fmt::format(
                       " and its {} helper process(es) were not saturated",
                       w.helpers.size())),
         "one Python thread cannot launch work fast enough: avoid .item()/.cpu()/print of tensors every step, use larger batches (fewer, bigger kernels), torch.compile or CUDA graphs; move preprocessing into DataLoader workers"});
  }
}

// Throttling, other processes on the GPU, a narrowed PCIe link.
void gpu_conditions(
    const JobWindowInput& w,
    const JobFacts& f,
    const JobDiagnosisOptions& o,
    Findings& out) {
  if (!w.gpu) {
    return;
  }
  {
    std::string share;
    if (w.others_sm_mean && *w.others_sm_mean > 0) {
      share = fmt::format(
          "; their kernels ran {:.0f}% of the time", *w.others_sm_mean);
    }
    for (auto finding :
         {throttle_finding(*w.gpu, f.where, o.gpu),
          other_process_finding(w.gpu->other_processes, f.where, share)}) {
      if (finding) {
        out.push_back(std::move(*finding));
      }
    }
  }
  if (w.pcie_width && w.pcie_max_width && w.pcie_gen && w.pcie_max_gen) {
    // A link below its generation at idle is power saving; below its width,
    // or below its generation while busy, it is narrowed.
    const bool busy = f.sm && *f.sm >= 50;
    if (*w.pcie_width < *w.pcie_max_width ||
        (busy && *w.pcie_gen < *w.pcie_max_gen)) {
      out.push_back(
          {"pcie-narrowed",
           fmt::format(
               "{}: PCIe link at gen {} x{} of gen {} x{}",
               f.where,
               *w.pcie_gen,
               *w.pcie_width,
               *w.pcie_max_gen,
               *w.pcie_max_width),
           "host-to-device copies run slower than the slot allows: reseat the card or move it to a full x16 slot, check the BIOS's PCIe settings; nvidia-smi -q -d PCIE"});
    }
  }
}

// The GPU idles and nothing above explains it.
void under_used(const JobWindowInput& w, const JobFacts& f, Findings& out) {
  const bool explained =
      std::any_of(out.begin(), out.end(), [](const Finding& x) {
        return x.verdict == "input-bound" || x.verdict == "host-bound" ||
            x.verdict == "cpu-only";
      });
  if (f.gpu_idle && !explained) {
    out.push_back(
        {"under-used",
         fmt::format(
             "{}: {} while the CPUs were not the limit (main process {:.0f}% of a core, machine {:.0f}%, I/O wait {:.0f}%)",
             f.where,
             f.sm_words,
             w.main_cpu_mean,
             w.host_cpu_mean,
             w.host_iowait_mean),
         "each step gives the GPU too little work: a larger batch (hotloop tune batch finds the largest that fits), bf16 autocast and channels_last for more work per kernel; CUDA graphs remove launch gaps"});
  }
}

} // namespace

Diagnosis diagnose_job(const JobWindowInput& w, const JobDiagnosisOptions& o) {
  const JobFacts f = facts_of(w, o);
  Diagnosis d;
  cpu_only(w, f, d.findings);
  memory(w, f, o, d.findings);
  input_or_host_bound(w, f, d.findings);
  gpu_conditions(w, f, o, d.findings);
  under_used(w, f, d.findings);
  std::stable_sort(
      d.findings.begin(), d.findings.end(), [](const auto& a, const auto& b) {
        return rank(a.verdict) < rank(b.verdict);
      });
  if (d.findings.empty()) {
    d.findings.push_back(
        {"healthy",
         f.sm ? fmt::format(
                    "{}: {}{}",
                    f.where,
                    f.sm_words,
                    w.steps > 0 ? fmt::format("; {:.2f} steps/s", w.steps_per_s)
                                : std::string())
              : fmt::format("{}: nothing holds the job back", f.where),
         ""});
  }
  return d;
}

} // namespace hotloop::telemetry
