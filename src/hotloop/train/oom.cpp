#include "hotloop/train/oom.h"

#include <unistd.h>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "hotloop/core/units.h"
#include "hotloop/cuda/cuda_info.h"
#include "hotloop/env/gpu_probe.h"
#include "hotloop/env/nvml_library.h"
#include "hotloop/errors.h"
#include "hotloop/telemetry/samples.h"

namespace hotloop::train {

namespace {

// The compute processes NVML sees on the GPU CUDA calls `device`, this one
// left out.
nlohmann::json gpu_processes(int device) {
  const cuda::State cs = cuda::state();
  std::string uuid;
  for (const auto& d : cs.devices) {
    if (d.index == device) {
      uuid = d.uuid;
    }
  }
  const env::NvmlFacts facts = env::probe_nvml(nvml::default_library_path());
  nlohmann::json out = nlohmann::json::array();
  if (!facts.loaded) {
    return out;
  }
  for (const auto& g : facts.gpus) {
    if (!g.uuid.has_value() || *g.uuid != uuid || !g.processes.has_value()) {
      continue;
    }
    for (const auto& p : *g.processes) {
      if (p.pid == static_cast<unsigned int>(::getpid())) {
        continue;
      }
      out.push_back(
          {{"pid", p.pid}, {"name", p.name}, {"used_bytes", p.used_bytes}});
    }
  }
  return out;
}

} // namespace

std::optional<std::int64_t> injected_oom_limit() {
  const char* text = std::getenv("HOTLOOP_INJECT_OOM_ABOVE");
  if (text == nullptr || *text == '\0') {
    return std::nullopt;
  }
  // HOTLOOP_INJECT_OOM_RANK=R: only that rank of a data-parallel job.
  const char* only = std::getenv("HOTLOOP_INJECT_OOM_RANK");
  const char* rank = std::getenv("RANK");
  if (only != nullptr && *only != '\0' &&
      std::string(only) != (rank != nullptr ? rank : "0")) {
    return std::nullopt;
  }
  std::int64_t n = -1;
  const char* end = text + std::char_traits<char>::length(text);
  const auto [ptr, ec] = std::from_chars(text, end, n);
  if (ec != std::errc() || ptr != end || n < 0) {
    throw UsageError(
        fmt::format(
            "HOTLOOP_INJECT_OOM_ABOVE={}: expected a number of samples", text),
        "unset it, or give the largest micro-batch that may run");
  }
  return n;
}

std::vector<std::int64_t> injected_overflow_steps() {
  const char* text = std::getenv("HOTLOOP_INJECT_OVERFLOW_STEPS");
  std::vector<std::int64_t> steps;
  if (text == nullptr || *text == '\0') {
    return steps;
  }
  const std::string all(text);
  std::size_t at = 0;
  while (at <= all.size()) {
    const std::size_t comma = std::min(all.find(',', at), all.size());
    std::int64_t n = 0;
    const char* begin = all.data() + at;
    const char* end = all.data() + comma;
    const auto [ptr, ec] = std::from_chars(begin, end, n);
    if (ec != std::errc() || ptr != end || n < 1) {
      throw UsageError(
          fmt::format(
              "HOTLOOP_INJECT_OVERFLOW_STEPS={}: expected step numbers (1-based) separated by commas",
              text),
          "unset it, or give the steps whose gradients overflow: 3,4");
    }
    steps.push_back(n);
    at = comma + 1;
  }
  return steps;
}

void inject_oom_if_above(
    const std::optional<std::int64_t>& limit,
    std::int64_t samples) {
  if (limit && samples > *limit) {
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "out of memory (injected: HOTLOOP_INJECT_OOM_ABOVE=",
        *limit,
        ", the micro-batch holds ",
        samples,
        " samples)");
  }
}

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
  r["other_processes"] = gpu_processes(index);
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

} // namespace hotloop::train
