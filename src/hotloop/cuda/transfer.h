#pragma once
// The last step of the loader (data/loader.h): a filled batch buffer on the
// host becomes the batch on the training device, in the format the run asked
// for. CPU (host_transfer.cpp): the decode threads wrote the batch in its
// final form (data/normalize.h), which is handed on without a copy. CUDA
// (cuda_transfer.cpp): non_blocking copy from pinned memory on a separate
// stream that the compute stream waits on; the uint8 batch (4x fewer bytes
// than float32 to cross) is then normalized on the GPU.

#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace hotloop::cuda {

// What a batch of images is when delivered: normalized ((x / 255 - mean) /
// std, per channel) in `dtype` (float32 or bfloat16), NCHW or channels-last;
// or, normalize false, the uint8 (B, C, H, W) bytes as decoded.
struct BatchFormat {
  std::vector<float> mean;
  std::vector<float> std;
  bool normalize = true;
  at::ScalarType dtype = at::kFloat;
  bool channels_last = false;
};

// Normalized float images (any float dtype, any layout) in `format`'s dtype
// and layout; the same tensor where they already are.
at::Tensor in_format(const at::Tensor& images, const BatchFormat& format);

struct Delivered {
  // (B, C, H, W) on the device: uint8, or normalized (float32 NCHW on a GPU;
  // in the BatchFormat where the threads normalized)
  at::Tensor images;
  at::Tensor labels; // (B,) int64 on the device
  // Blocks until the host buffer may be refilled (its copy finished); empty
  // when it may be at once.
  std::function<void()> buffer_reusable;
};

class Transfer {
 public:
  virtual ~Transfer() = default;
  // `images`: the buffer's uint8 bytes, or a batch already in the format.
  virtual Delivered deliver(
      const at::Tensor& images,
      const at::Tensor& labels) = 0;
  virtual bool wants_pinned_buffers() const = 0;
};

// Hands a batch on: a formatted one as it is (its buffer is reused only
// once nothing holds it: data/loader.cpp), uint8 bytes as a copy.
std::unique_ptr<Transfer> make_cpu_transfer();
// Throws EnvError when CUDA cannot be used (LibTorch without CUDA, no device).
std::unique_ptr<Transfer> make_cuda_transfer(
    c10::Device device,
    BatchFormat format);

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
