// make_cuda_transfer for a LibTorch built without CUDA.
#include <fmt/format.h>

#include "hotloop/cuda/transfer.h"
#include "hotloop/errors.h"

namespace hotloop::cuda {

std::unique_ptr<Transfer> make_cuda_transfer(c10::Device device, BatchFormat) {
  throw EnvError(
      fmt::format(
          "cannot deliver batches to {}: LibTorch was built without CUDA",
          device.str()),
      "install a CUDA build of torch/LibTorch, or use --device cpu");
}

} // namespace hotloop::cuda
