#include "hotloop/train/oom_recovery.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_copy.h>
#include <fmt/format.h>
#include <unistd.h>

#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/env/gpu_probe.h"
#include "hotloop/env/nvml_library.h"
#include "hotloop/env/own_process.h"
#include "hotloop/errors.h"
#include "hotloop/telemetry/samples.h"
#include "hotloop/train/optimizer.h"
#include "hotloop/train/options.h"
#include "hotloop/train/rng_state.h"

namespace hotloop::train {

namespace {

// The compute processes NVML sees on the GPU CUDA calls `device`, this one
// (which holds `reserved` bytes there) left out.
env::OtherProcesses gpu_processes(int device, std::uint64_t reserved) {
  const cuda::State cs = cuda::state();
  std::string uuid;
  for (const auto& d : cs.devices) {
    if (d.index == device) {
      uuid = d.uuid;
    }
  }
  const env::NvmlFacts facts = env::probe_nvml(nvml::default_library_path());
  if (!facts.loaded) {
    return {};
  }
  for (const auto& g : facts.gpus) {
    if (g.uuid.has_value() && *g.uuid == uuid && g.processes.has_value()) {
      return env::other_processes(
          *g.processes, env::this_process(true, reserved));
    }
  }
  return {};
}

} // namespace

std::int64_t smaller_micro_batch(
    std::int64_t per_rank_batch,
    std::int64_t micro) {
  for (std::int64_t m = micro / 2; m >= 1; --m) {
    if (per_rank_batch % m == 0) {
      return m;
    }
  }
  return 0;
}

nlohmann::json memory_report(const c10::Device& device) {
  nlohmann::json r = {
      {"device", device.str()},
      {"process_rss_bytes", telemetry::process_rss_bytes()}};
  if (!device.is_cuda()) {
    return r;
  }
  const int index = device.index() < 0 ? 0 : device.index();
  const cuda::MemoryStats m = cuda::memory_stats(index);
  const cuda::AllocatorLayout l = cuda::allocator_layout(index);
  const cuda::DeviceMemory d = cuda::device_memory(index);
  r["allocated_bytes"] = m.allocated;
  r["reserved_bytes"] = m.reserved;
  r["peak_allocated_bytes"] = m.peak_allocated;
  r["peak_reserved_bytes"] = m.peak_reserved;
  r["reserved_unused_bytes"] = l.free_in_cache;
  r["largest_free_block_bytes"] = l.largest_free_block;
  r["segments"] = l.segments;
  r["alloc_retries"] = m.alloc_retries;
  r["device_free_bytes"] = d.free;
  r["device_total_bytes"] = d.total;
  const env::OtherProcesses others = gpu_processes(index, m.reserved);
  r["other_processes"] = nlohmann::json::array();
  for (const auto& p : others.processes) {
    r["other_processes"].push_back(
        {{"pid", p.pid}, {"name", p.name}, {"used_bytes", p.used_bytes}});
  }
  if (!others.unknown.empty()) {
    r["other_processes_unknown"] = others.unknown;
  }
  return r;
}

std::string describe_memory(const nlohmann::json& r) {
  if (!r.contains("reserved_bytes")) {
    return fmt::format(
        "{}: process resident memory {}",
        r.value("device", std::string("cpu")),
        format_bytes(r.value("process_rss_bytes", std::uint64_t{0})));
  }
  auto b = [&](const char* key) {
    return format_bytes(r.value(key, std::uint64_t{0}));
  };
  std::string others;
  const auto& procs = r["other_processes"];
  for (const auto& p : procs) {
    others += fmt::format(
        "{}{} (pid {}, {})",
        others.empty() ? "" : ", ",
        p.value("name", std::string("?")),
        p.value("pid", 0U),
        format_bytes(p.value("used_bytes", std::uint64_t{0})));
  }
  if (r.contains("other_processes_unknown")) {
    others =
        "cannot tell (" + r["other_processes_unknown"].get<std::string>() + ")";
  }
  return fmt::format(
      "{}: peak allocated {}, peak reserved {} of {} (driver: {} free); largest free cached block {} in {} segment(s); other processes: {}",
      r.value("device", std::string("cuda")),
      b("peak_allocated_bytes"),
      b("peak_reserved_bytes"),
      b("device_total_bytes"),
      b("device_free_bytes"),
      b("largest_free_block_bytes"),
      r.value("segments", std::uint64_t{0}),
      others.empty() ? std::string("none") : others);
}

void OomRecovery::save(const RunState& s) {
  if (!enabled_) {
    return;
  }
  // Gradients need no copy: they are None between steps.
  at::NoGradGuard no_grad;
  if (buffers_.empty()) {
    for (const auto& b : s.model->buffers()) {
      if (b.defined()) {
        buffers_.push_back(b);
        saved_buffers_.push_back(b.clone());
      }
    }
  } else {
    at::_foreach_copy_(saved_buffers_, buffers_);
  }
  saved_rng_ = rng_state(s.device);
}

OomRecovery::Plan OomRecovery::shrink(
    const RunState& s,
    const std::string& error) {
  const TrainerOptions& o = *s.options;
  s.optimizer->zero_grad();
  if (enabled_) {
    at::NoGradGuard no_grad;
    if (!buffers_.empty()) {
      at::_foreach_copy_(buffers_, saved_buffers_);
    }
    set_rng_state(saved_rng_, s.device);
  }
  const std::int64_t per_rank = o.batch / s.world_size;
  const std::int64_t smaller =
      enabled_ ? smaller_micro_batch(per_rank, s.micro_batch) : 0;
  nlohmann::json report = memory_report(s.device);
  report["step"] = s.step + 1;
  report["micro_batch"] = s.micro_batch;
  report["accum_steps"] = s.accum_steps;
  report["error"] = error;
  report["action"] = smaller > 0
      ? nlohmann::json(
            {{"micro_batch", smaller}, {"accum_steps", per_rank / smaller}})
      : nlohmann::json("stop");
  if (s.device.is_cuda()) {
    cuda::empty_cache();
  }
  // Each rank reports its own device (rank 0: oom_report.jsonl).
  Plan plan;
  if (!s.run_dir.empty()) {
    plan.report_path =
        (std::filesystem::path(s.run_dir) /
         (s.rank == 0 ? std::string("oom_report.jsonl")
                      : fmt::format("oom_report-rank{}.jsonl", s.rank)))
            .string();
    std::ofstream(plan.report_path, std::ios::app) << report.dump() << '\n';
  }
  if (smaller == 0) {
    throw OutOfMemoryError(
        fmt::format(
            "step {}: out of memory at micro-batch {}{} ({}); {}{}",
            s.step + 1,
            s.micro_batch,
            enabled_ ? "" : " with OOM recovery off",
            error,
            describe_memory(report),
            plan.report_path.empty() ? std::string()
                                     : "; memory report: " + plan.report_path),
        fmt::format(
            "{}options that need less memory: --precision bf16 (or fp16 on CUDA), --activation-checkpointing stages, a smaller --size or model; on a shared GPU, stop the other processes",
            enabled_
                ? ""
                : "--oom-recovery true halves the micro-batch and keeps the effective batch; "));
  }
  plan.micro_batch = smaller;
  plan.accum_steps = per_rank / smaller;
  plan.message = fmt::format(
      "step {}: {} at micro-batch {}; redoing the step as {} x {} (batch {} unchanged){}",
      s.step + 1,
      error,
      s.micro_batch,
      plan.accum_steps,
      smaller,
      o.batch,
      plan.report_path.empty() ? std::string()
                               : "; report: " + plan.report_path);
  ++recoveries_;
  return plan;
}

} // namespace hotloop::train
