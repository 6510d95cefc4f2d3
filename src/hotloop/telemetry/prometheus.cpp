#include "hotloop/telemetry/prometheus.h"

#include <tuple>

#include <fmt/format.h>

namespace hotloop::telemetry {

std::string prometheus_text(
    const StepRecord& r,
    const std::optional<Sample>& sample,
    const std::optional<Diagnosis>& d,
    const cuda::MemoryStats& m,
    bool on_cuda) {
  std::string out;
  auto metric =
      [&](const char* name, const char* type, const char* help, double v) {
        out += fmt::format(
            "# HELP hotloop_{0} {1}\n# TYPE hotloop_{0} {2}\nhotloop_{0} {3}\n",
            name,
            help,
            type,
            v);
      };
  metric(
      "step", "counter", "Optimizer steps done.", static_cast<double>(r.step));
  metric("loss", "gauge", "Training loss of the latest step.", r.loss);
  metric("learning_rate", "gauge", "Learning rate of the latest step.", r.lr);
  metric(
      "images_per_second",
      "gauge",
      "Images per second of the latest step.",
      r.images_per_s);
  if (r.tokens_per_s > 0) {
    metric(
        "tokens_per_second",
        "gauge",
        "Tokens per second of the latest step (language models).",
        r.tokens_per_s);
  }
  if (on_cuda) {
    metric(
        "cuda_allocated_bytes",
        "gauge",
        "CUDA caching allocator: bytes held by tensors.",
        static_cast<double>(m.allocated));
    metric(
        "cuda_reserved_bytes",
        "gauge",
        "CUDA caching allocator: bytes taken from the driver.",
        static_cast<double>(m.reserved));
    metric(
        "cuda_alloc_retries",
        "counter",
        "cudaMalloc failures retried after freeing the cache.",
        static_cast<double>(m.alloc_retries));
  }
  if (sample) {
    out +=
        "# HELP hotloop_gpu_utilization_percent GPU busy over NVML's sample period.\n# TYPE hotloop_gpu_utilization_percent gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_utilization_percent{{gpu=\"{}\"}} {}\n",
          g.index,
          g.util_percent.value_or(0));
    }
    // GPM counters (Hopper and later; absent where the GPU has none).
    for (const auto& [name, help, field] :
         {std::tuple{
              "sm_active_percent",
              "SMs busy (GPM), percent.",
              &GpmMetrics::sm_active_percent},
          {"sm_occupancy_percent",
           "Warps active vs the maximum (GPM), percent.",
           &GpmMetrics::sm_occupancy_percent},
          {"tensor_active_percent",
           "Time any tensor pipe ran (GPM), percent.",
           &GpmMetrics::tensor_active_percent},
          {"dram_bw_percent",
           "DRAM bandwidth used vs its peak (GPM), percent.",
           &GpmMetrics::dram_bw_percent}}) {
      std::string lines;
      for (const auto& g : sample->gpus) {
        if (g.gpm && (*g.gpm).*field) {
          lines += fmt::format(
              "hotloop_gpu_{}{{gpu=\"{}\"}} {}\n",
              name,
              g.index,
              *((*g.gpm).*field));
        }
      }
      if (!lines.empty()) {
        out += fmt::format(
            "# HELP hotloop_gpu_{} {}\n# TYPE hotloop_gpu_{} gauge\n{}",
            name,
            help,
            name,
            lines);
      }
    }
    out +=
        "# HELP hotloop_gpu_memory_used_bytes GPU memory in use (all processes).\n# TYPE hotloop_gpu_memory_used_bytes gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_memory_used_bytes{{gpu=\"{}\"}} {}\n",
          g.index,
          g.memory_used_bytes.value_or(0));
    }
    out +=
        "# HELP hotloop_gpu_temperature_celsius GPU temperature.\n# TYPE hotloop_gpu_temperature_celsius gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_temperature_celsius{{gpu=\"{}\"}} {}\n",
          g.index,
          g.temperature_c.value_or(0));
    }
    out +=
        "# HELP hotloop_gpu_power_watts GPU power draw.\n# TYPE hotloop_gpu_power_watts gauge\n";
    for (const auto& g : sample->gpus) {
      out += fmt::format(
          "hotloop_gpu_power_watts{{gpu=\"{}\"}} {}\n",
          g.index,
          g.power_w.value_or(0));
    }
    metric(
        "host_cpu_percent",
        "gauge",
        "Host CPU utilization.",
        sample->host.cpu_percent.value_or(0));
    metric(
        "process_rss_bytes",
        "gauge",
        "This process's resident memory.",
        static_cast<double>(sample->host.rss_bytes));
  }
  if (d) {
    out += fmt::format(
        "# HELP hotloop_verdict The latest window's diagnosis (1 for the verdict).\n# TYPE hotloop_verdict gauge\nhotloop_verdict{{verdict=\"{}\"}} 1\n",
        d->primary().verdict);
  }
  return out;
}

} // namespace hotloop::telemetry
