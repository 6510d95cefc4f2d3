#pragma once
// Out of memory during training: what the device held when it happened (the
// memory report), the next smaller micro-batch that keeps the effective batch,
// and the fault-injection hook that lets tests without a GPU raise the real
// c10::OutOfMemoryError.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

namespace hotloop::train {

// HOTLOOP_INJECT_OOM_ABOVE=N: a training step whose micro-batch holds more
// than N samples throws c10::OutOfMemoryError after its backward (the memory
// peak). HOTLOOP_INJECT_OOM_RANK=R limits it to rank R of a data-parallel
// job. For tests; nullopt when unset (or another rank). Throws UsageError for a
// value that is not a non-negative integer.
std::optional<std::int64_t> injected_oom_limit();

// Throws c10::OutOfMemoryError when `limit` is set and `samples` exceeds it.
void inject_oom_if_above(
    const std::optional<std::int64_t>& limit,
    std::int64_t samples);

// HOTLOOP_INJECT_OVERFLOW_STEPS=N[,M...]: after the backward of optimizer step
// N (1-based), the first trainable parameter's gradient is set to +inf, as an
// fp16 overflow leaves it: the loss scaler skips the step (without one, the
// update makes the weights non-finite). For tests; empty when unset. Throws
// UsageError for a value that is not a list of positive integers.
std::vector<std::int64_t> injected_overflow_steps();

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
