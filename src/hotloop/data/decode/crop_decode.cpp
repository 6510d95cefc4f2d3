#include "hotloop/data/decode/crop_decode.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <ATen/ops/from_blob.h>

#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/decode/image_tensor.h"

namespace hotloop::data {
namespace {

// The pixels [first, last) of one axis that resizing `extent` pixels from
// `lo` to `out` reads: the triangle filter reaches max(extent / out, 1)
// beyond each output pixel's center (augment.cpp's make_taps), so the region
// reaches that far (and a pixel more) past the crop, clamped to the image, and
// the crop's edge pixels blend the same neighbours as in a full decode.
std::pair<int, int> axis_span(
    double lo,
    double extent,
    std::int64_t out,
    int size) {
  const double support = std::max(extent / static_cast<double>(out), 1.0);
  const int first = std::max(0, static_cast<int>(std::floor(lo - support)) - 1);
  const int last =
      std::min(size, static_cast<int>(std::ceil(lo + extent + support)) + 1);
  return {first, std::max(last, first + 1)};
}

} // namespace

int crop_scale_eighths(
    const CropBox& box,
    std::int64_t out_h,
    std::int64_t out_w) {
  // k / 8 * box >= out on both axes; a hair of slack for boxes that are an
  // exact multiple.
  const double need = 8.0 *
      std::max(static_cast<double>(out_w) / box.w,
               static_cast<double>(out_h) / box.h);
  // Powers of two only: libjpeg-turbo has SIMD inverse transforms for 8/8,
  // 4/8 and 2/8 (1/8 is the DC alone), while 3/8 and 5/8 to 7/8 run its C
  // ones and scale 4:2:0 chroma up with 6x6 to 14x14 transforms. Measured
  // with every k/8 allowed (bench/data_vs_torchvision.py, 2 cores): auto
  // ran at 0.92x of region decode on the ImageNet-like set.
  int k = 1;
  while (k < 8 && k < need - 1e-9) {
    k *= 2;
  }
  return k;
}

CropDecodePlan plan_crop_decode(
    int width,
    int height,
    const CropBox& box,
    OutputSize out,
    bool scale) {
  const std::int64_t out_h = out.h, out_w = out.w;
  CropDecodePlan p;
  p.scale_eighths = scale ? crop_scale_eighths(box, out_h, out_w) : 8;
  const double s = p.scale_eighths / 8.0;
  p.box = {box.x0 * s, box.y0 * s, box.w * s, box.h * s, box.flip};
  const auto [x0, x1] =
      axis_span(p.box.x0, p.box.w, out_w, scaled_size(width, p.scale_eighths));
  const auto [y0, y1] =
      axis_span(p.box.y0, p.box.h, out_h, scaled_size(height, p.scale_eighths));
  p.rect = {x0, y0, x1 - x0, y1 - y0};
  return p;
}

CropDecoded decode_augment_into(
    std::span<const std::uint8_t> bytes,
    const std::string& name,
    const SampleTransform& t,
    std::uint64_t seed,
    std::uint8_t* dst) {
  const int channels = t.decode.channels;
  const AugmentSpec& spec = t.spec;
  const Decode mode = t.mode;
  CropDecoded done;
  if (mode == Decode::Full || bytes.empty() ||
      sniff_image_format(bytes) != ImageFormat::Jpeg) {
    const at::Tensor image = to_chw_tensor(decode_image(bytes, name, t.decode));
    augment_into(image, dst, spec, seed);
    if (const auto box = photo_box(spec, seed, image.size(1), image.size(2))) {
      done.box = *box;
    }
    done.decoded = {
        0, 0, static_cast<int>(image.size(2)), static_cast<int>(image.size(1))};
    return done;
  }
  // Reused by this thread's next image: no allocation per image once it has
  // grown to the largest region.
  thread_local std::vector<std::uint8_t> buffer;
  CropDecodePlan plan;
  bool has_box = false;
  const JpegRegion region = decode_jpeg_region(
      bytes,
      name,
      [&](const JpegInfo& info) {
        const auto box = photo_box(spec, seed, info.height, info.width);
        if (!box) { // not a crop: the whole image
          return JpegRegionRequest{8, {}, channels};
        }
        has_box = true;
        done.box = *box;
        plan = plan_crop_decode(
            info.width,
            info.height,
            *box,
            {spec.out_h, spec.out_w},
            mode == Decode::Auto);
        return JpegRegionRequest{plan.scale_eighths, plan.rect, channels};
      },
      buffer,
      t.decode.max_pixels);
  done.decoded = region.rect;
  if (!has_box) {
    const at::Tensor hwc = at::from_blob(
        const_cast<std::uint8_t*>(region.pixels),
        {region.rect.h, region.rect.w, channels},
        {static_cast<std::int64_t>(region.row_bytes), channels, 1},
        at::TensorOptions().dtype(at::kByte));
    augment_into(hwc.permute({2, 0, 1}), dst, spec, seed);
    return done;
  }
  done.region = true;
  done.scale_eighths = plan.scale_eighths;
  CropBox in_region = plan.box;
  in_region.x0 -= region.rect.x;
  in_region.y0 -= region.rect.y;
  const InterleavedPixels pixels{
      region.pixels,
      region.rect.h,
      region.rect.w,
      channels,
      static_cast<std::int64_t>(region.row_bytes)};
  resize_box_into(pixels, in_region, dst, {spec.out_h, spec.out_w});
  return done;
}

} // namespace hotloop::data
