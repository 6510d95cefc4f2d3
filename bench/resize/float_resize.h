#pragma once
// The resize benchmark's baseline: hotloop's float resize as it was before
// the fixed-point kernels (resize.h), same filter, same box semantics.

#include <cstdint>

#include "hotloop/data/resize.h"

namespace hotloop::bench {

void float_resize_into(
    const data::ImageView& src,
    const data::ResizeBox& box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow);

} // namespace hotloop::bench
