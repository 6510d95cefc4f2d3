#pragma once
// One image through the decode threads' train or eval transform
// (data/augment.h): a (C, out_h, out_w) uint8 tensor for `seed`.

#include <cstdint>

#include <ATen/ops/empty.h>

#include "hotloop/data/augment.h"

namespace hotloop::test {

inline at::Tensor augmented(
    const at::Tensor& image,
    const data::AugmentSpec& spec,
    std::uint64_t seed) {
  at::Tensor out =
      at::empty({image.size(0), spec.out_h, spec.out_w}, at::kByte);
  data::augment_into(image, out.data_ptr<std::uint8_t>(), spec, seed);
  return out;
}

} // namespace hotloop::test
