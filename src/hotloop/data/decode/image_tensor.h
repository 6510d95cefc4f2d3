#pragma once
// A decoded image as a tensor, without copying its pixels.

#include <ATen/core/Tensor.h>

#include "hotloop/data/decode/image_decode.h"

namespace hotloop::data {

// (C, H, W) uint8 tensor of a decoded image: a strided view of its interleaved
// pixels, which it takes over (no copy). Call .contiguous() for planar memory.
at::Tensor to_chw_tensor(DecodedImage image);

} // namespace hotloop::data
