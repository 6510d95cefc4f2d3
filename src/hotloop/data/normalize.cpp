#include "hotloop/data/normalize.h"

#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// One channel's plane: out[k * step] = in[k] * scale - shift. Two rounded
// float operations, never fused, as the GPU's mul_ then sub_.
template <typename Out>
void normalize_plane(
    const std::uint8_t* in,
    std::int64_t n,
    float scale,
    float shift,
    Out* out,
    std::int64_t step) {
  for (std::int64_t k = 0; k < n; ++k) {
    const float v = static_cast<float>(in[k]) * scale;
    out[k * step] = static_cast<Out>(v - shift);
  }
}

template <typename Out>
void write_sample(
    const std::uint8_t* chw,
    std::int64_t c,
    std::int64_t plane,
    const std::vector<float>& scale,
    const std::vector<float>& shift,
    bool channels_last,
    Out* dst) {
  for (std::int64_t ch = 0; ch < c; ++ch) {
    if (channels_last) { // (H, W, C): channel ch every c elements
      normalize_plane(
          chw + ch * plane, plane, scale[ch], shift[ch], dst + ch, c);
    } else {
      normalize_plane(
          chw + ch * plane, plane, scale[ch], shift[ch], dst + ch * plane, 1);
    }
  }
}

} // namespace

cuda::BatchFormat batch_format(LoaderOptions& o, std::int64_t channels) {
  if (o.mean.empty()) {
    o.mean = channels == 1 ? std::vector<float>{0.2860f}
                           : std::vector<float>{0.485f, 0.456f, 0.406f};
    o.std = channels == 1 ? std::vector<float>{0.3530f}
                          : std::vector<float>{0.229f, 0.224f, 0.225f};
  }
  if (o.mean.size() != static_cast<std::size_t>(channels) ||
      o.std.size() != o.mean.size()) {
    throw UsageError(fmt::format(
        "normalization has {} means and {} stds for {} channels",
        o.mean.size(),
        o.std.size(),
        channels));
  }
  if (o.dtype != at::kFloat && o.dtype != at::kBFloat16) {
    throw UsageError(fmt::format(
        "the loader delivers float32 or bfloat16 images, not {}",
        c10::toString(o.dtype)));
  }
  return {o.mean, o.std, o.normalize, o.dtype, o.channels_last};
}

SampleNormalizer::SampleNormalizer(const cuda::BatchFormat& format)
    : dtype_(format.dtype), channels_last_(format.channels_last) {
  std::tie(scale_, shift_) =
      cuda::normalization_factors(format.mean, format.std);
}

at::Tensor SampleNormalizer::empty_batch(
    std::int64_t b,
    std::int64_t c,
    std::int64_t h,
    std::int64_t w) const {
  return at::empty(
      {b, c, h, w},
      at::TensorOptions().dtype(dtype_).memory_format(
          channels_last_ ? at::MemoryFormat::ChannelsLast
                         : at::MemoryFormat::Contiguous));
}

void SampleNormalizer::write(
    const std::uint8_t* chw,
    const at::Tensor& batch,
    std::int64_t index) const {
  const std::int64_t c = batch.size(1);
  const std::int64_t plane = batch.size(2) * batch.size(3);
  const std::int64_t offset = index * c * plane; // both layouts
  const auto write_as = [&](auto* batch_data) {
    write_sample(
        chw, c, plane, scale_, shift_, channels_last_, batch_data + offset);
  };
  if (dtype_ == at::kBFloat16) {
    write_as(batch.data_ptr<c10::BFloat16>());
  } else {
    write_as(batch.data_ptr<float>());
  }
}

} // namespace hotloop::data
