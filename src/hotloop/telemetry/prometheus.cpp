#include "hotloop/telemetry/prometheus.h"

#include <string>
#include <tuple>

#include "hotloop/telemetry/prometheus_writer.h"

namespace hotloop::telemetry {
namespace {

void step_metrics(PrometheusWriter& w, const StepRecord& r) {
  w.counter("step", "Optimizer steps done.", static_cast<double>(r.step));
  w.gauge("loss", "Training loss of the latest step.", r.loss);
  w.gauge("learning_rate", "Learning rate of the latest step.", r.lr);
  w.gauge(
      "images_per_second",
      "Images per second of the latest step.",
      r.images_per_s);
  if (r.tokens_per_s > 0) {
    w.gauge(
        "tokens_per_second",
        "Tokens per second of the latest step (language models).",
        r.tokens_per_s);
  }
}

void allocator_metrics(PrometheusWriter& w, const cuda::MemoryStats& m) {
  w.gauge(
      "cuda_allocated_bytes",
      "CUDA caching allocator: bytes held by tensors.",
      static_cast<double>(m.allocated));
  w.gauge(
      "cuda_reserved_bytes",
      "CUDA caching allocator: bytes taken from the driver.",
      static_cast<double>(m.reserved));
  w.counter(
      "cuda_alloc_retries",
      "cudaMalloc failures retried after freeing the cache.",
      static_cast<double>(m.alloc_retries));
}

// GPM counters (Hopper and later): a family only where a GPU has it.
void gpm_metrics(PrometheusWriter& w, const Sample& sample) {
  for (const auto& [name, help, field] :
       {std::tuple{
            "gpu_sm_active_percent",
            "SMs busy (GPM), percent.",
            &GpmMetrics::sm_active_percent},
        {"gpu_sm_occupancy_percent",
         "Warps active vs the maximum (GPM), percent.",
         &GpmMetrics::sm_occupancy_percent},
        {"gpu_tensor_active_percent",
         "Time any tensor pipe ran (GPM), percent.",
         &GpmMetrics::tensor_active_percent},
        {"gpu_dram_bw_percent",
         "DRAM bandwidth used vs its peak (GPM), percent.",
         &GpmMetrics::dram_bw_percent}}) {
    bool any = false;
    for (const auto& g : sample.gpus) {
      if (g.gpm && (*g.gpm).*field) {
        if (!any) {
          w.family(name, "gauge", help);
          any = true;
        }
        w.sample({{"gpu", std::to_string(g.index)}}, *((*g.gpm).*field));
      }
    }
  }
}

void device_metrics(PrometheusWriter& w, const Sample& sample) {
  w.family(
      "gpu_utilization_percent",
      "gauge",
      "GPU busy over NVML's sample period.");
  for (const auto& g : sample.gpus) {
    w.sample({{"gpu", std::to_string(g.index)}}, g.util_percent.value_or(0));
  }
  gpm_metrics(w, sample);
  w.family(
      "gpu_memory_used_bytes", "gauge", "GPU memory in use (all processes).");
  for (const auto& g : sample.gpus) {
    w.sample(
        {{"gpu", std::to_string(g.index)}},
        static_cast<double>(g.memory_used_bytes.value_or(0)));
  }
  w.family("gpu_temperature_celsius", "gauge", "GPU temperature.");
  for (const auto& g : sample.gpus) {
    w.sample({{"gpu", std::to_string(g.index)}}, g.temperature_c.value_or(0));
  }
  w.family("gpu_power_watts", "gauge", "GPU power draw.");
  for (const auto& g : sample.gpus) {
    w.sample({{"gpu", std::to_string(g.index)}}, g.power_w.value_or(0));
  }
  w.gauge(
      "host_cpu_percent",
      "Host CPU utilization.",
      sample.host.cpu_percent.value_or(0));
  w.gauge(
      "process_rss_bytes",
      "This process's resident memory.",
      static_cast<double>(sample.host.rss_bytes));
}

} // namespace

std::string prometheus_text(
    const StepRecord& r,
    const std::optional<Sample>& sample,
    const std::optional<Diagnosis>& d,
    const cuda::MemoryStats& m,
    bool on_cuda) {
  PrometheusWriter w("hotloop_");
  step_metrics(w, r);
  if (on_cuda) {
    allocator_metrics(w, m);
  }
  if (sample) {
    device_metrics(w, *sample);
  }
  if (d) {
    w.family(
         "verdict",
         "gauge",
         "The latest window's diagnosis (1 for the verdict).")
        .sample({{"verdict", d->primary().verdict}}, 1);
  }
  return w.text();
}

} // namespace hotloop::telemetry
