#pragma once
// The last step of the loader (data/loader.h): a filled uint8 batch buffer on
// the host becomes the float batch on the training device. CPU
// (host_transfer.cpp): normalized in place of the copy. CUDA
// (cuda_transfer.cpp): non_blocking copy from pinned
// memory on a separate stream, the compute stream waits on an event, then
// converted and normalized on the GPU.

#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace hotloop::cuda {

struct Delivered {
  at::Tensor images; // (B, C, H, W) float32 on the device
  at::Tensor labels; // (B,) int64 on the device
  // Blocks until the host buffer may be refilled (its copy finished); empty
  // when it may be at once.
  std::function<void()> buffer_reusable;
};

class Transfer {
 public:
  virtual ~Transfer() = default;
  virtual Delivered deliver(
      const at::Tensor& images_u8,
      const at::Tensor& labels) = 0;
  virtual bool wants_pinned_buffers() const = 0;
};

// `normalize` false: the batch stays uint8, as decoded (copied out of the
// buffer, to the device on a GPU).
std::unique_ptr<Transfer> make_cpu_transfer(
    std::vector<float> mean,
    std::vector<float> std,
    bool normalize = true);
// Throws EnvError when CUDA cannot be used (LibTorch without CUDA, no device).
std::unique_ptr<Transfer> make_cuda_transfer(
    c10::Device device,
    std::vector<float> mean,
    std::vector<float> std,
    bool normalize = true);

// Per-channel scale and shift so that x * scale - shift == (x / 255 - mean) /
// std.
std::pair<std::vector<float>, std::vector<float>> normalization_factors(
    const std::vector<float>& mean,
    const std::vector<float>& std);

// The same as (1, C, 1, 1) tensors on `device`: so that x * scale - shift == (x
// / 255 - mean) / std.
std::pair<at::Tensor, at::Tensor> normalization(
    const std::vector<float>& mean,
    const std::vector<float>& std,
    c10::Device device);

} // namespace hotloop::cuda
