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
    if (!scale_.defined() || scale_.size(1) != images_u8.size(1)) {
      std::tie(scale_, shift_) =
          normalization(mean_, std_, c10::Device(c10::kCPU));
    }
    // to(kFloat) copies, so the uint8 buffer can be refilled as soon as this
    // returns.
    at::Tensor images = images_u8.to(at::kFloat).mul_(scale_).sub_(shift_);
    return {std::move(images), labels.clone(), {}};
  }
  bool wants_pinned_buffers() const override {
    return false;
  }

 private:
  std::vector<float> mean_, std_;
  at::Tensor scale_, shift_;
};

} // namespace

std::unique_ptr<Transfer> make_cpu_transfer(
    std::vector<float> mean,
    std::vector<float> std) {
  return std::make_unique<CpuTransfer>(std::move(mean), std::move(std));
}

std::pair<at::Tensor, at::Tensor> normalization(
    const std::vector<float>& mean,
    const std::vector<float>& std,
    c10::Device device) {
  const auto c = static_cast<std::int64_t>(mean.size());
  std::vector<float> scale(mean.size()), shift(mean.size());
  for (std::size_t i = 0; i < mean.size(); ++i) {
    scale[i] = 1.0f / (255.0f * std[i]);
    shift[i] = mean[i] / std[i];
  }
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  return {
      at::tensor(scale, opts).view({1, c, 1, 1}).to(device),
      at::tensor(shift, opts).view({1, c, 1, 1}).to(device)};
}

} // namespace hotloop::data
