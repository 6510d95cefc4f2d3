#pragma once
// Decoding fused with the photo transforms (augment.h). For a JPEG, the crop
// is drawn first from the header's size (photo_box: the same draw a full
// decode makes), then only the rectangle the resize reads is decoded (the
// crop, its filter's support around it, widened to the iMCU grid; rows below
// it never), with Decode::Auto at the smallest DCT scale k/8 (k = 1, 2, 4, 8)
// whose decoded crop is still at least the output size, so the resize that
// follows only shrinks. The resize, flip and write into the batch slot read the
// decoded region directly: no full-size image exists. PNG, and Decode::Full,
// decode the whole image and run augment_into.

#include <cstdint>
#include <span>
#include <string>

#include "hotloop/data/augment.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/jpeg_region.h"
#include "hotloop/data/loader.h"

namespace hotloop::data {

struct CropDecodePlan {
  int scale_eighths = 8;
  PixelRect rect; // to decode, in the scaled image's pixels
  CropBox box; // the crop, in the scaled image's pixels
};

// The smallest k in 1, 2, 4, 8 whose k/8 keeps `box` at least out_h x out_w
// (8 when even the full size is smaller).
int crop_scale_eighths(
    const CropBox& box,
    std::int64_t out_h,
    std::int64_t out_w);

// The plan for the crop `box` (full-size pixels) of a width x height JPEG
// resized to `out`: the scale (8/8 unless `scale`), the box at that scale,
// and the rectangle its resize reads.
CropDecodePlan plan_crop_decode(
    int width,
    int height,
    const CropBox& box,
    OutputSize out,
    bool scale);

// What decode_augment_into did, for tests and `data check`.
struct CropDecoded {
  bool region = false; // decoded a region (else the whole image)
  int scale_eighths = 8;
  CropBox box; // the crop in full-size pixels (when the transform has one)
  PixelRect decoded; // what was decoded, in the scaled image's pixels
};

// What a loader makes of each encoded sample: `channels` (1 or 3), the
// transform `spec`, decoding what `mode` allows.
struct SampleTransform {
  DecodeOptions decode; // channels, and the largest image taken
  AugmentSpec spec;
  Decode mode = Decode::Auto;
};

// Decodes `bytes` and writes the sample `t` makes of it for `seed` into dst
// ((channels, out_h, out_w) uint8), as decode_image + augment_into do.
// Throws DataError naming `name` for a bad file, as decode_image does.
CropDecoded decode_augment_into(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const SampleTransform& t,
    std::uint64_t seed,
    std::uint8_t* dst);

} // namespace hotloop::data
