#pragma once
// Out of memory during training: what the device held when it happened (the
// memory report) and the next smaller micro-batch that keeps the effective
// batch (recovery.h uses both; fault_injection.h raises the real
// c10::OutOfMemoryError for tests without a GPU).

#include <cstdint>
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

namespace hotloop::train {

// The largest micro-batch of at most half of `micro` that divides
// `per_rank_batch` (so that micro x accumulation stays the batch): micro / 2
// when micro is even. 0 when micro is already 1.
std::int64_t smaller_micro_batch(
    std::int64_t per_rank_batch,
    std::int64_t micro);

// What the device holds now: the caching allocator's allocated and reserved
// memory (current and peak), its largest free cached block and segment count,
// the driver's free and total memory, the other processes on the GPU (NVML),
// and this process's resident memory. On the CPU, only the last.
nlohmann::json memory_report(const c10::Device& device);

// One line for a log or an error message: "allocated 10.2 GiB, reserved 12.0
// GiB (peak 13.1 GiB) of 139.8 GiB; other processes: 1 (python, 3.0 GiB)".
std::string describe_memory(const nlohmann::json& report);

} // namespace hotloop::train
