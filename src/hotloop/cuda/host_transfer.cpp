#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>

#include "hotloop/cuda/transfer.h"

namespace hotloop::cuda {
namespace {

class CpuTransfer final : public Transfer {
 public:
  CpuTransfer(std::vector<float> mean, std::vector<float> std, bool normalize)
      : mean_(std::move(mean)), std_(std::move(std)), normalize_(normalize) {}

  Delivered deliver(const at::Tensor& images_u8, const at::Tensor& labels)
      override {
    if (!normalize_) {
      return {images_u8.clone(), labels.clone(), {}};
    }
    // One pass per channel computing x * scale - shift in float, the same
    // two rounded float operations as normalization() applies on a GPU (so
    // CPU and GPU batches are equal). The compiler vectorizes it, which a
    // 256-entry table lookup (the first version) cannot be; three tensor ops
    // (to float, mul, sub) would read and write the batch three times.
    const std::int64_t b = images_u8.size(0), c = images_u8.size(1);
    const std::int64_t plane = images_u8.size(2) * images_u8.size(3);
    at::Tensor images = reusable_output(images_u8.sizes());
    const std::uint8_t* in = images_u8.data_ptr<std::uint8_t>();
    float* out = images.data_ptr<float>();
    const auto [scale, shift] = normalization_factors(mean_, std_);
    for (std::int64_t i = 0; i < b; ++i) {
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const float sc = scale[ch], sh = shift[ch];
        const std::uint8_t* src = in + (i * c + ch) * plane;
        float* dst = out + (i * c + ch) * plane;
        for (std::int64_t k = 0; k < plane; ++k) {
          const float v = static_cast<float>(src[k]) * sc;
          dst[k] = v - sh;
        }
      }
    }
    return {std::move(images), labels.clone(), {}};
  }
  bool wants_pinned_buffers() const override {
    return false;
  }

 private:
  // A float batch from the last few this transfer made, when nothing else
  // holds it any more (no tensor, view or autograd record shares its
  // storage), else a new one. A batch of 64 photos at 224 px is 38 MB, which
  // the allocator gets from mmap and returns with munmap each time: reusing
  // the memory saves its page faults and zeroing (a quarter of the loader's
  // time on the photo benchmark, by perf).
  at::Tensor reusable_output(at::IntArrayRef sizes) {
    for (auto& t : pool_) {
      if (t.sizes() == sizes && t.use_count() == 1 &&
          t.storage().use_count() == 1) {
        return t;
      }
    }
    at::Tensor t = at::empty(sizes, at::kFloat);
    if (pool_.size() < kPool) {
      pool_.push_back(t);
    } else {
      pool_[next_evict_++ % kPool] = t;
    }
    return t;
  }

  static constexpr std::size_t kPool = 4;
  std::vector<float> mean_, std_;
  bool normalize_ = true;
  std::vector<at::Tensor> pool_;
  std::size_t next_evict_ = 0;
};

} // namespace

std::unique_ptr<Transfer> make_cpu_transfer(
    std::vector<float> mean,
    std::vector<float> std,
    bool normalize) {
  return std::make_unique<CpuTransfer>(
      std::move(mean), std::move(std), normalize);
}

std::pair<std::vector<float>, std::vector<float>> normalization_factors(
    const std::vector<float>& mean,
    const std::vector<float>& std) {
  std::vector<float> scale(mean.size()), shift(mean.size());
  for (std::size_t i = 0; i < mean.size(); ++i) {
    scale[i] = 1.0f / (255.0f * std[i]);
    shift[i] = mean[i] / std[i];
  }
  return {scale, shift};
}

std::pair<at::Tensor, at::Tensor> normalization(
    const std::vector<float>& mean,
    const std::vector<float>& std,
    c10::Device device) {
  const auto c = static_cast<std::int64_t>(mean.size());
  const auto [scale, shift] = normalization_factors(mean, std);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  return {
      at::tensor(scale, opts).view({1, c, 1, 1}).to(device),
      at::tensor(shift, opts).view({1, c, 1, 1}).to(device)};
}

} // namespace hotloop::cuda
