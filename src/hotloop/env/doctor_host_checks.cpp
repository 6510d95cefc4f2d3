// doctor's host checks: what decides whether the CPU side can keep a GPU fed.
#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hotloop/core/units.h"
#include "hotloop/env/doctor_checks.h"

namespace hotloop::env::checks {
namespace {

Check cpu_threads(const HostFacts& h) {
  Check c{"host.cpu", Status::Pass, {}, {}, {}};
  c.facts = {
      {"model", h.cpu_model},
      {"logical_cpus", h.logical_cpus},
      {"usable_cpus", h.usable_cpus},
      {"physical_cores", h.physical_cores},
      {"torch_intra_op_threads", h.torch_intra_op_threads}};
  // LibTorch sizes its pool by physical cores; hyperthreads add little to GEMM
  // and convolution.
  const unsigned int cores = h.physical_cores > 0
      ? std::min(h.physical_cores, h.usable_cpus)
      : h.usable_cpus;
  c.summary = fmt::format(
      "{}: {} usable CPU(s), {} core(s); LibTorch uses {} intra-op thread(s)",
      h.cpu_model.empty() ? "CPU" : h.cpu_model,
      h.usable_cpus,
      cores,
      h.torch_intra_op_threads);
  if (cores > 1 && h.torch_intra_op_threads < static_cast<int>(cores)) {
    c.status = Status::Warn;
    c.fix = fmt::format(
        "CPU work (the CPU rungs, data decoding in the trainer thread) uses {} of {} cores: "
        "export OMP_NUM_THREADS={} before starting, or pass --threads {} to hotloop commands",
        h.torch_intra_op_threads,
        cores,
        cores,
        cores);
  }
  return c;
}

Check memory(
    const HostFacts& h,
    const NvmlFacts& nvml,
    const DoctorThresholds& t) {
  Check c{"host.memory", Status::Pass, {}, {}, {}};
  c.facts = {
      {"total_bytes", fact(h.memory_total_bytes)},
      {"available_bytes", fact(h.memory_available_bytes)}};
  if (!h.memory_total_bytes.has_value() ||
      !h.memory_available_bytes.has_value()) {
    c.status = Status::Skip;
    c.summary = "host memory unknown: " + h.memory_total_bytes.missing_reason +
        h.memory_available_bytes.missing_reason;
    return c;
  }
  std::uint64_t gpu_total = 0;
  for (const auto& g : nvml.gpus) {
    gpu_total += g.memory_total_bytes.value.value_or(0);
  }
  c.facts["gpu_memory_total_bytes"] = gpu_total;
  c.summary = fmt::format(
      "{} total, {} available",
      format_bytes(*h.memory_total_bytes),
      format_bytes(*h.memory_available_bytes));
  if (*h.memory_available_bytes < t.min_available_host_memory_bytes) {
    c.status = Status::Warn;
    c.fix = fmt::format(
        "only {} of host memory is free: stop other programs before training, or the loader's "
        "pinned buffers and checkpoint saving may fail",
        format_bytes(*h.memory_available_bytes));
  } else if (gpu_total > 0 && *h.memory_total_bytes < gpu_total) {
    c.status = Status::Warn;
    c.summary +=
        fmt::format(", less than the GPUs' {}", format_bytes(gpu_total));
    c.fix =
        "host memory below total GPU memory limits resident datasets, pinned buffers and loading large "
        "checkpoints: add RAM, or keep datasets sharded on disk (wds:)";
  }
  return c;
}

Check shm(const HostFacts& h, const DoctorThresholds& t) {
  Check c{"host.shm", Status::Pass, {}, {}, {}};
  c.facts = {
      {"total_bytes", fact(h.shm_total_bytes)},
      {"free_bytes", fact(h.shm_free_bytes)}};
  if (!h.shm_total_bytes.has_value()) {
    c.status = Status::Warn;
    c.summary = h.shm_total_bytes.missing_reason;
    c.fix =
        "mount a tmpfs on /dev/shm; NCCL needs it to pass data between ranks";
    return c;
  }
  c.summary = fmt::format(
      "/dev/shm {} ({} free)",
      format_bytes(*h.shm_total_bytes),
      format_bytes(*h.shm_free_bytes));
  if (*h.shm_total_bytes < t.min_shm_bytes) {
    c.status = Status::Warn;
    c.fix =
        "/dev/shm is small (Docker's default is 64 MiB) and NCCL runs between local ranks fail or hang in it: "
        "start the container with --shm-size=8g or --ipc=host";
  }
  return c;
}

Check memlock(const HostFacts& h, bool gpu, const DoctorThresholds& t) {
  Check c{"host.memlock", Status::Pass, {}, {}, {}};
  if (!h.memlock_limit_bytes.has_value()) {
    c.status = Status::Skip;
    c.summary = h.memlock_limit_bytes.missing_reason;
    return c;
  }
  const bool unlimited =
      *h.memlock_limit_bytes == std::numeric_limits<std::uint64_t>::max();
  c.facts = {
      {"limit_bytes",
       unlimited ? nlohmann::json("unlimited")
                 : nlohmann::json(*h.memlock_limit_bytes)}};
  c.summary = "locked-memory limit (ulimit -l) " +
      (unlimited ? std::string("unlimited")
                 : format_bytes(*h.memlock_limit_bytes));
  if (!unlimited && *h.memlock_limit_bytes < t.min_memlock_bytes) {
    if (gpu) {
      c.status = Status::Warn;
      c.fix =
          "pinned buffers from cudaHostAlloc are not bound by this limit, but cudaHostRegister, GPUDirect RDMA "
          "and NCCL over InfiniBand are: `ulimit -l unlimited` (limits.conf: '* - memlock unlimited'; Docker: "
          "--ulimit memlock=-1)";
    } else {
      c.summary += " (matters only with a GPU)";
    }
  }
  return c;
}

Check governor(const HostFacts& h) {
  Check c{"host.governor", Status::Pass, {}, {}, {}};
  if (!h.cpu_governors.has_value()) {
    c.status = Status::Skip;
    c.summary = h.cpu_governors.missing_reason;
    return c;
  }
  c.facts = {{"governors", *h.cpu_governors}};
  c.summary = fmt::format(
      "CPU frequency governor: {}", fmt::join(*h.cpu_governors, ", "));
  const bool all_performance = std::all_of(
      h.cpu_governors->begin(),
      h.cpu_governors->end(),
      [](const std::string& g) { return g == "performance"; });
  if (!all_performance) {
    c.status = Status::Warn;
    c.fix =
        "a power-saving governor lowers CPU clocks between bursts, which slows the data loader and kernel "
        "launches: `sudo cpupower frequency-set -g performance`";
  }
  return c;
}

Check disk(const HostFacts& h, const DoctorThresholds& t) {
  Check c{"host.disk", Status::Pass, {}, {}, {}};
  c.facts = {
      {"run_dir", h.run_dir}, {"free_bytes", fact(h.run_dir_free_bytes)}};
  if (!h.run_dir_free_bytes.has_value()) {
    c.status = Status::Skip;
    c.summary = h.run_dir_free_bytes.missing_reason;
    return c;
  }
  const std::uint64_t free = *h.run_dir_free_bytes;
  c.summary = fmt::format(
      "{} free where runs are written ({})", format_bytes(free), h.run_dir);
  if (free < t.fail_disk_free_bytes) {
    c.status = Status::Fail;
    c.fix =
        "checkpoints and logs will fail to write: free disk space, or write runs elsewhere with --out DIR";
  } else if (free < t.warn_disk_free_bytes) {
    c.status = Status::Warn;
    c.fix =
        "checkpoints of larger models need several GiB each: free disk space, or write runs elsewhere with --out DIR";
  }
  return c;
}

} // namespace

void host(
    const DoctorFacts& facts,
    const DoctorThresholds& thresholds,
    std::vector<Check>& out) {
  out.push_back(cpu_threads(facts.host));
  out.push_back(memory(facts.host, facts.nvml, thresholds));
  out.push_back(shm(facts.host, thresholds));
  out.push_back(memlock(
      facts.host,
      nvml_sees_gpu(facts.nvml) || facts.torch.cuda.available,
      thresholds));
  out.push_back(governor(facts.host));
  out.push_back(disk(facts.host, thresholds));
}

} // namespace hotloop::env::checks
