// The loader's CUDA delivery: pinned host batch -> GPU on a copy stream,
// overlapped with compute.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "hotloop/cuda/transfer.h"
#include "hotloop/errors.h"

namespace hotloop::cuda {
namespace {

class CudaTransfer final : public Transfer {
 public:
  CudaTransfer(c10::Device device, BatchFormat format)
      : device_(device),
        format_(std::move(format)),
        copy_stream_(c10::cuda::getStreamFromPool(
            /*isHighPriority=*/false,
            device.index())) {}

  // The uint8 batch crosses as it is (4x fewer bytes than float32) and is
  // normalized on the GPU; the loader gives it its dtype and layout there.
  Delivered deliver(const at::Tensor& host_images, const at::Tensor& labels)
      override {
    const c10::cuda::CUDAGuard guard(device_);
    if (!scale_.defined() || scale_.size(1) != host_images.size(1)) {
      std::tie(scale_, shift_) =
          normalization(format_.mean, format_.std, device_);
    }
    const c10::cuda::CUDAStream compute =
        c10::cuda::getCurrentCUDAStream(device_.index());
    at::Tensor images;
    at::Tensor gpu_labels;
    {
      const c10::cuda::CUDAStreamGuard on_copy(copy_stream_);
      // From pinned memory, non_blocking returns at once; the copy engine moves
      // the bytes while the compute stream runs the previous step.
      images = host_images.to(device_, /*non_blocking=*/true);
      gpu_labels = labels.to(device_, /*non_blocking=*/true);
    }
    auto copied = std::make_shared<at::cuda::CUDAEvent>();
    copied->record(copy_stream_);
    copied->block(
        compute); // the compute stream waits for the copy, the host does not
    // Allocated on the copy stream, used on the compute stream: tell the
    // caching allocator.
    images.record_stream(compute);
    gpu_labels.record_stream(compute);
    if (format_.normalize) { // (uint8 -> float32) on the GPU
      images = images.to(at::kFloat).mul_(scale_).sub_(shift_);
    }
    return {std::move(images), std::move(gpu_labels), [copied] {
              copied->synchronize();
            }};
  }

  bool wants_pinned_buffers() const override {
    return true;
  }

 private:
  c10::Device device_;
  BatchFormat format_;
  c10::cuda::CUDAStream copy_stream_;
  at::Tensor scale_, shift_;
};

} // namespace

std::unique_ptr<Transfer> make_cuda_transfer(
    c10::Device device,
    BatchFormat format) {
  if (!torch::cuda::is_available()) {
    throw EnvError(
        fmt::format(
            "cannot deliver batches to {}: CUDA is not available",
            device.str()),
        "run `hotloop doctor` to see why, or use --device cpu");
  }
  if (device.index() < 0) {
    device = c10::Device(c10::kCUDA, 0);
  }
  return std::make_unique<CudaTransfer>(device, std::move(format));
}

} // namespace hotloop::cuda
