#include "hotloop/data/decode/image_tensor.h"

#include <utility>
#include <vector>

#include <ATen/ops/from_blob.h>

namespace hotloop::data {

at::Tensor to_chw_tensor(DecodedImage image) {
  // A (C, H, W) view of the interleaved pixels, owning them: no copy. The
  // loader reads any strides.
  auto* owned = new std::vector<std::uint8_t>(std::move(image.pixels));
  at::Tensor hwc = at::from_blob(
      owned->data(),
      {image.height, image.width, image.channels},
      [owned](void*) { delete owned; },
      at::TensorOptions().dtype(at::kByte));
  return hwc.permute({2, 0, 1});
}

} // namespace hotloop::data
