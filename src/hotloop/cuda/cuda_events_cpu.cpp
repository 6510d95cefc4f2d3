// gpu_timer.h's CUDA events for a LibTorch built without CUDA: none.
#include "hotloop/cuda/gpu_timer.h"
#include "hotloop/errors.h"

namespace hotloop::cuda {

std::unique_ptr<EventApi> cuda_events(int /*device*/) {
  throw EnvError(
      "CUDA events need a LibTorch built with CUDA",
      "install the CUDA build of torch (scripts/setup does)");
}

} // namespace hotloop::cuda
