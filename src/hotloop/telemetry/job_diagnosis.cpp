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

} // namespace

Diagnosis diagnose_job(const JobWindowInput& w, const JobDiagnosisOptions& o) {
  Diagnosis d;
  auto add = [&](std::string verdict, std::string evidence, std::string fix) {
    d.findings.push_back(
        {std::move(verdict), std::move(evidence), std::move(fix)});
  };
  const std::string when = fmt::format("{:.0f}-{:.0f} s", w.from_s, w.to_s);
  const std::string where =
      w.gpu ? fmt::format("GPU {}, {}", w.gpu_index, when) : when;
  double job_cpu = w.main_cpu_mean;
  for (const auto& h : w.helpers) {
    job_cpu += h.cpu_mean;
  }

  if (!w.holds_gpu) {
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
    add("cpu-only",
        fmt::format(
            "{}: the job runs on the CPU ({:.0f}% of a core over {} process(es)): {}",
            when,
            job_cpu,
            1 + w.helpers.size(),
            why),
        fix);
  }

  // The SM share the job's kernels had: its own when the driver tells it,
  // else the whole GPU's.
  std::optional<double> sm;
  std::string sm_words;
  if (w.holds_gpu && w.gpu) {
    sm = w.job_sm_mean ? *w.job_sm_mean : w.gpu->util_mean;
    sm_words = w.job_sm_mean
        ? fmt::format("the job's kernels ran {:.0f}% of the time", *sm)
        : fmt::format("the GPU was busy {:.0f}% of the time", *sm);
  }
  const bool gpu_idle = sm && *sm < o.gpu_busy;
  const double saturated_min = o.core_saturated;
  std::vector<HelperProcess> saturated;
  for (const auto& h : w.helpers) {
    if (demand(h.cpu_mean, h.runnable_mean) >= saturated_min) {
      saturated.push_back(h);
    }
  }
  // The main process's Python thread: its own runnable time where known
  // (a process's CPU use counts its other threads too).
  const bool main_saturated = std::isnan(w.main_runnable_mean)
      ? w.main_cpu_mean >= o.core_saturated
      : w.main_runnable_mean >= o.core_saturated;
  const bool io_wait = w.host_iowait_mean >= o.iowait;
  // The main process doing work of its own: at least half a core (its
  // runnable time where known; on the CPU its math threads count too).
  const bool main_busy =
      std::max(
          w.main_cpu_mean,
          std::isnan(w.main_runnable_mean) ? 0.0 : w.main_runnable_mean) >= 50;

  if (w.gpu) {
    const GpuWindow& g = *w.gpu;
    if (g.memory_total > 0 &&
        static_cast<double>(g.memory_used_last) >=
            o.memory_full * static_cast<double>(g.memory_total)) {
      add("memory-near-full",
          fmt::format(
              "{}: {} of {} in use ({} of it the job's)",
              where,
              format_bytes(g.memory_used_last),
              format_bytes(g.memory_total),
              format_bytes(w.job_memory)),
          "one larger batch or longer sequence from an out-of-memory error: a smaller batch with gradient accumulation, activation checkpointing, bf16; PyTorch's allocator caches freed blocks, so torch.cuda.memory_allocated() tells what is really used");
    }
  }
  const auto& h = w.memory_history;
  if (grows_steadily(h, o.leak_windows, o.leak_growth)) {
    add("memory-growing",
        fmt::format(
            "{}: the job's GPU memory grew in each of the last {} windows, {} -> {}",
            where,
            o.leak_windows,
            format_bytes(h[h.size() - 1 - o.leak_windows]),
            format_bytes(h.back())),
        "something keeps tensors alive from step to step: accumulate the loss with loss.item() (not the tensor), do not keep outputs in lists, detach what you log; NVML sees the allocator's cache too, so check torch.cuda.memory_allocated()");
  }
  if (gpu_idle && (!saturated.empty() || io_wait)) {
    std::string evidence = fmt::format("{}: {}", where, sm_words);
    if (!saturated.empty()) {
      evidence += fmt::format(
          " while {} of its {} helper process(es) were saturated: {}",
          saturated.size(),
          w.helpers.size(),
          helper_list(saturated));
    }
    if (io_wait) {
      evidence += fmt::format(
          "{}the machine waited on I/O {:.0f}% of the time (the job read {}/s)",
          saturated.empty() ? " while " : "; ",
          w.host_iowait_mean,
          format_bytes(static_cast<std::uint64_t>(w.read_bytes_per_s)));
    }
    add("input-bound",
        evidence,
        io_wait && saturated.empty()
            ? "the data comes off the disk too slowly: faster storage or a local copy, fewer larger files (WebDataset shards: hotloop pack), a page-cache-sized dataset held in memory"
            : "the loader cannot keep up: more DataLoader workers (num_workers, up to the cores free), cheaper decoding and augmentation (or on the GPU), pre-decoded data (hotloop pack), persistent_workers=True and pin_memory=True");
  } else if (!w.holds_gpu && !saturated.empty() && !main_busy) {
    // On the CPU too the loader can be the limit: the main process waits
    // while its workers cannot keep up.
    add("input-bound",
        fmt::format(
            "{}: on the CPU, the main process {} (pid {}) was mostly waiting ({}) while {} of its {} helper process(es) were saturated: {}",
            when,
            w.main_name,
            w.main_pid,
            cpu_words(w.main_cpu_mean, w.main_runnable_mean),
            saturated.size(),
            w.helpers.size(),
            helper_list(saturated)),
        "the loader cannot keep up: more DataLoader workers (num_workers, up to the cores free), cheaper decoding and augmentation, pre-decoded data (hotloop pack), persistent_workers=True");
  } else if (gpu_idle && main_saturated) {
    add("host-bound",
        fmt::format(
            "{}: {} while the main process {} (pid {}) used {}{}",
            where,
            sm_words,
            w.main_name,
            w.main_pid,
            cpu_words(w.main_cpu_mean, w.main_runnable_mean),
            w.helpers.empty()
                ? std::string()
                : fmt::format(
                      " and its {} helper process(es) were not saturated",
                      w.helpers.size())),
        "one Python thread cannot launch work fast enough: avoid .item()/.cpu()/print of tensors every step, use larger batches (fewer, bigger kernels), torch.compile or CUDA graphs; move preprocessing into DataLoader workers");
  }
  if (w.gpu) {
    std::string share;
    if (w.others_sm_mean && *w.others_sm_mean > 0) {
      share = fmt::format(
          "; their kernels ran {:.0f}% of the time", *w.others_sm_mean);
    }
    for (auto f :
         {throttle_finding(*w.gpu, where, o.gpu),
          other_process_finding(w.gpu->other_processes, where, share)}) {
      if (f) {
        d.findings.push_back(std::move(*f));
      }
    }
  }
  if (w.gpu && w.pcie_width && w.pcie_max_width && w.pcie_gen &&
      w.pcie_max_gen) {
    // A link below its generation at idle is power saving; below its width,
    // or below its generation while busy, it is narrowed.
    const bool busy = sm && *sm >= 50;
    if (*w.pcie_width < *w.pcie_max_width ||
        (busy && *w.pcie_gen < *w.pcie_max_gen)) {
      add("pcie-narrowed",
          fmt::format(
              "{}: PCIe link at gen {} x{} of gen {} x{}",
              where,
              *w.pcie_gen,
              *w.pcie_width,
              *w.pcie_max_gen,
              *w.pcie_max_width),
          "host-to-device copies run slower than the slot allows: reseat the card or move it to a full x16 slot, check the BIOS's PCIe settings; nvidia-smi -q -d PCIE");
    }
  }
  const bool explained =
      std::any_of(d.findings.begin(), d.findings.end(), [](const Finding& f) {
        return f.verdict == "input-bound" || f.verdict == "host-bound" ||
            f.verdict == "cpu-only";
      });
  if (gpu_idle && !explained) {
    add("under-used",
        fmt::format(
            "{}: {} while the CPUs were not the limit (main process {:.0f}% of a core, machine {:.0f}%, I/O wait {:.0f}%)",
            where,
            sm_words,
            w.main_cpu_mean,
            w.host_cpu_mean,
            w.host_iowait_mean),
        "each step gives the GPU too little work: a larger batch (hotloop tune batch finds the largest that fits), bf16 autocast and channels_last for more work per kernel; CUDA graphs remove launch gaps");
  }
  std::stable_sort(
      d.findings.begin(), d.findings.end(), [](const auto& a, const auto& b) {
        return rank(a.verdict) < rank(b.verdict);
      });
  if (d.findings.empty()) {
    add("healthy",
        sm ? fmt::format(
                 "{}: {}{}",
                 where,
                 sm_words,
                 w.steps > 0 ? fmt::format("; {:.2f} steps/s", w.steps_per_s)
                             : std::string())
           : fmt::format("{}: nothing holds the job back", where),
        "");
  }
  return d;
}

} // namespace hotloop::telemetry
