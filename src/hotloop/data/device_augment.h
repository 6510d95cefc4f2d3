#pragma once
// Training augmentation for a whole batch on the batch's device
// (--augment-device gpu): the decode threads only decode and stage each image
// at a fixed size; the random choices are then applied to the batch at once.
// - Small images: zero padding, random crop at the native size, horizontal
//   flip: one gather; the same values the decode threads would produce.
// - Photos: random-resized-crop + flip as one bilinear grid sample per batch,
//   from the staged image (the shorter side resized to out/0.875 and
//   center-cropped square), so the crops see that image's resolution.
// The draws come from the same per-sample seeds as the CPU path.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotloop/data/augment.h"

namespace hotloop::data {

// `images`: (B, C, H, W) float, already normalized; `seeds`: one per sample;
// `zero`: (1, C, 1, 1), what a black pixel normalizes to (the padding value).
// Returns (B, C, spec.out_h, spec.out_w) on the same device.
at::Tensor augment_batch(
    const at::Tensor& images,
    const std::vector<std::uint64_t>& seeds,
    const AugmentSpec& spec,
    const at::Tensor& zero);

// The small-image train transform for a batch as one gather: zero padding by
// `padding` (filled with `fill`, (1, C, 1, 1), or 0 when undefined), a crop
// back to (H, W) at each sample's (dy, dx), and its flip. `params`: (B, 3)
// int64 on the batch's device, rows (dy, dx, flip) from small_image_params.
// Works for any dtype: the resident path runs it on uint8 before normalizing.
at::Tensor pad_crop_flip(
    const at::Tensor& images,
    const at::Tensor& params,
    std::int64_t padding,
    const at::Tensor& fill);

// The staging size for photos: the side of the square the decode threads
// produce when the crops are made on the device.
std::int64_t staging_size(std::int64_t out);

} // namespace hotloop::data
