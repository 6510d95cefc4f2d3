#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>

#include "hotloop/data/transfer.h"

namespace hotloop::data {
namespace {

class CpuTransfer final : public Transfer {
 public:
  CpuTransfer(std::vector<float> mean, std::vector<float> std)
      : mean_(std::move(mean)), std_(std::move(std)) {}

  Delivered deliver(const at::Tensor& images_u8, const at::Tensor& labels)
      override {
    // One pass through a 256-entry table per channel: x * scale - shift for
    // every byte value, the
    // same float operations as normalization() applies on a GPU (so CPU and GPU
    // batches are equal). Three tensor ops (to float, mul, sub) would read and
    // write the batch three times.
    const std::int64_t b = images_u8.size(0), c = images_u8.size(1);
    const std::int64_t plane = images_u8.size(2) * images_u8.size(3);
    at::Tensor images = at::empty(images_u8.sizes(), at::kFloat);
    const std::uint8_t* in = images_u8.data_ptr<std::uint8_t>();
    float* out = images.data_ptr<float>();
    const auto [scale, shift] = normalization_factors(mean_, std_);
    std::vector<float> lut(static_cast<std::size_t>(256 * c));
    for (std::int64_t ch = 0; ch < c; ++ch) {
      for (int v = 0; v < 256; ++v) {
        lut[static_cast<std::size_t>(ch * 256 + v)] =
            static_cast<float>(v) * scale[ch] - shift[ch];
      }
    }
    for (std::int64_t i = 0; i < b; ++i) {
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const float* table = lut.data() + ch * 256;
        const std::uint8_t* src = in + (i * c + ch) * plane;
        float* dst = out + (i * c + ch) * plane;
        for (std::int64_t k = 0; k < plane; ++k) {
          dst[k] = table[src[k]];
        }
      }
    }
    return {std::move(images), labels.clone(), {}};
  }
  bool wants_pinned_buffers() const override {
    return false;
  }

 private:
  std::vector<float> mean_, std_;
};

} // namespace

std::unique_ptr<Transfer> make_cpu_transfer(
    std::vector<float> mean,
    std::vector<float> std) {
  return std::make_unique<CpuTransfer>(std::move(mean), std::move(std));
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

} // namespace hotloop::data
