#pragma once
// The decode threads' last step on the CPU: a sample's (C, H, W) bytes
// normalized into its slot of the batch, in the batch's dtype and layout, so
// the consumer hands the batch on as it is. The arithmetic is the GPU's
// (cuda/transfer.h's normalization: x * scale - shift, two rounded float32
// operations), then bfloat16 rounds to nearest even as a tensor's .to()
// does: a batch is the same bit for bit wherever it was normalized.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/cuda/transfer.h"
#include "hotloop/data/loader.h"

namespace hotloop::data {

// The format `o` asks for. Empty means and stds are filled in (Fashion-MNIST's
// for one channel, ImageNet's for three). UsageError when they do not match
// the channels, or for a dtype other than float32 and bfloat16.
cuda::BatchFormat batch_format(LoaderOptions& o, std::int64_t channels);

class SampleNormalizer {
 public:
  // format.normalize must be true; dtype float32 or bfloat16.
  explicit SampleNormalizer(const cuda::BatchFormat& format);

  // An uninitialized (b, c, h, w) batch in the format's dtype and layout.
  at::Tensor empty_batch(
      std::int64_t b,
      std::int64_t c,
      std::int64_t h,
      std::int64_t w) const;

  // Writes sample `index` of `batch` (empty_batch's) from `chw`: (C, H, W)
  // bytes, planar.
  void write(
      const std::uint8_t* chw,
      const at::Tensor& batch,
      std::int64_t index) const;

 private:
  std::vector<float> scale_, shift_;
  at::ScalarType dtype_;
  bool channels_last_;
  bool avx2_ = false; // planar channels with AVX2 where the CPU has it
};

} // namespace hotloop::data
