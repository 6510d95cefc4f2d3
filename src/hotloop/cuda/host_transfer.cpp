#include <ATen/ops/tensor.h>

#include "hotloop/cuda/transfer.h"

namespace hotloop::cuda {
namespace {

// The decode threads wrote a normalized batch in its final form
// (data/normalize.h): it is handed on as it is, a view of its buffer, which
// the loader refills only once nothing holds it (a batch of 64 photos at
// 224 px is 38 MB; allocating one per batch cost a quarter of the loader's
// time in page faults and zeroing, by perf). A uint8 batch is copied out of
// its buffer, which is refilled at once.
class CpuTransfer final : public Transfer {
 public:
  Delivered deliver(const at::Tensor& images, const at::Tensor& labels)
      override {
    if (images.scalar_type() == at::kByte) {
      return {images.clone(), labels.clone(), {}};
    }
    return {images, labels.clone(), {}};
  }
  bool wants_pinned_buffers() const override {
    return false;
  }
};

} // namespace

std::unique_ptr<Transfer> make_cpu_transfer() {
  return std::make_unique<CpuTransfer>();
}

at::Tensor in_format(const at::Tensor& images, const BatchFormat& format) {
  at::Tensor out =
      images.scalar_type() == format.dtype ? images : images.to(format.dtype);
  if (out.dim() == 4) {
    out = out.contiguous(
        format.channels_last ? at::MemoryFormat::ChannelsLast
                             : at::MemoryFormat::Contiguous);
  }
  return out;
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
