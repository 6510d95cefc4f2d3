// NvjpegDecoder for a LibTorch built without CUDA.
#include <fmt/format.h>

#include "hotloop/cuda/nvjpeg_decoder.h"

namespace hotloop::cuda {

std::unique_ptr<NvjpegDecoder> NvjpegDecoder::open(c10::Device device, int) {
  throw EnvError(
      fmt::format(
          "cannot decode JPEGs on {}: LibTorch was built without CUDA",
          device.str()),
      "install a CUDA build of torch/LibTorch, or use --decode-device cpu");
}

} // namespace hotloop::cuda
