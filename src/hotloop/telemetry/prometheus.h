#pragma once
// The Prometheus exposition text (format 0.0.4) of a training run's latest
// step: its step, loss, learning rate and images/s, the caching allocator's
// memory on a GPU, each GPU's utilization, memory, temperature and power,
// the host's CPU and this process's memory, and the latest verdict.

#include <optional>
#include <string>

#include "hotloop/cuda/cuda_info.h"
#include "hotloop/telemetry/diagnosis.h"
#include "hotloop/telemetry/run_telemetry.h"
#include "hotloop/telemetry/samples.h"

namespace hotloop::telemetry {

std::string prometheus_text(
    const StepRecord& r,
    const std::optional<Sample>& sample,
    const std::optional<Diagnosis>& d,
    const cuda::MemoryStats& m,
    bool on_cuda);

} // namespace hotloop::telemetry
