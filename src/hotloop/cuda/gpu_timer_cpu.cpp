// gpu_timer.h for a LibTorch built without CUDA: nothing to time.
#include "hotloop/cuda/gpu_timer.h"

namespace hotloop::cuda {

struct GpuTimer::Impl {};

GpuTimer::GpuTimer(int device, std::size_t labels) {}
GpuTimer::~GpuTimer() = default;
void GpuTimer::begin() {}
void GpuTimer::mark(std::size_t label) {}
std::optional<std::vector<double>> GpuTimer::end() {
  return std::nullopt;
}

} // namespace hotloop::cuda
