#pragma once
// --precision fp32 | tf32 | bf16 | fp16, and the autocast scope a forward pass
// runs in.

#include <string>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "hotloop/train/options.h"

namespace hotloop::train {

// "Mixed precision" made concrete for `device`: bf16 on the CPU and on GPUs
// of compute capability 8.0 and up, else fp16 (with loss scaling).
Precision mixed_precision_for(const c10::Device& device);

// Sets the process's TF32 switches for `p` on CUDA (tf32: matmul and cuDNN
// convolutions in TF32; everything else: full fp32). No-op on the CPU.
void configure_math_mode(Precision p, const c10::Device& device);

// Turns autocast on for `device` in bf16 or fp16 for its lifetime (no-op for
// fp32 and tf32), and restores the previous state after. Throws UsageError for
// fp16 on the CPU (no CPU fp16 autocast worth having: use bf16).
// `cache` false: weights are cast anew at each use instead of once per region
// (what a CUDA graph capture needs: the cache would hand the graph tensors
// freed at the region's end).
class AutocastScope {
 public:
  AutocastScope(Precision p, const c10::Device& device, bool cache = true);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_ = false;
  bool was_enabled_ = false;
  bool was_caching_ = true;
  c10::ScalarType was_dtype_ = c10::kFloat;
};

} // namespace hotloop::train
