#include "hotloop/data/augment.h"

#include "hotloop/core/random.h"
#include "hotloop/data/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hotloop::data {
namespace {

// SplitMix64 stream: the per-sample random source.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    return splitmix64(state);
  }
  double uniform() { // [0, 1)
    return static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
};

struct Box {
  double x0, y0, w, h; // in source pixels
};

// torchvision's RandomResizedCrop parameters: 10 tries at a random area and
// aspect ratio, else the central crop at the closest allowed ratio.
Box random_resized_crop(std::int64_t h, std::int64_t w, Rng& rng) {
  const double area = static_cast<double>(h * w);
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + rng.uniform() * (1.0 - 0.08));
    const double ratio = std::exp(log_lo + rng.uniform() * (log_hi - log_lo));
    const double cw = std::round(std::sqrt(target * ratio));
    const double chh = std::round(std::sqrt(target / ratio));
    if (cw > 0 && chh > 0 && cw <= w && chh <= h) {
      const double x0 = std::floor(rng.uniform() * (w - cw + 1));
      const double y0 = std::floor(rng.uniform() * (h - chh + 1));
      return {x0, y0, cw, chh};
    }
  }
  const double in_ratio = static_cast<double>(w) / h;
  double cw = w, chh = h;
  if (in_ratio < 3.0 / 4.0) {
    chh = std::round(w / (3.0 / 4.0));
  } else if (in_ratio > 4.0 / 3.0) {
    cw = std::round(h * (4.0 / 3.0));
  }
  return {(w - cw) / 2, (h - chh) / 2, cw, chh};
}

} // namespace

CropBox photo_crop(
    std::uint64_t seed,
    std::int64_t h,
    std::int64_t w,
    bool flip) {
  Rng rng{seed};
  const Box box = random_resized_crop(h, w, rng);
  return {box.x0, box.y0, box.w, box.h, flip && (rng.next() & 1) != 0};
}

SmallImageParams small_image_params(
    std::uint64_t seed,
    int padding,
    bool flip) {
  Rng rng{seed};
  SmallImageParams p;
  p.dy = static_cast<int>(
             rng.next() % static_cast<std::uint64_t>(2 * padding + 1)) -
      padding;
  p.dx = static_cast<int>(
             rng.next() % static_cast<std::uint64_t>(2 * padding + 1)) -
      padding;
  p.flip = flip && (rng.next() & 1) != 0;
  return p;
}

std::uint64_t sample_seed(
    std::uint64_t seed,
    std::size_t epoch,
    std::size_t index) {
  return mix64(mix64(seed, epoch), index);
}

std::optional<CropBox> photo_box(
    const AugmentSpec& spec,
    std::uint64_t seed,
    std::int64_t h,
    std::int64_t w) {
  const std::int64_t oh = spec.out_h, ow = spec.out_w;
  if (spec.mode == AugmentSpec::Mode::Train) {
    if (spec.small_images) {
      return std::nullopt;
    }
    return photo_crop(seed, h, w, spec.flip);
  }
  if (h == oh && w == ow) {
    return std::nullopt;
  }
  if (spec.mode == AugmentSpec::Mode::Eval && !spec.small_images) {
    // Resize the shorter side to out/0.875, then center crop out: in source
    // pixels, a centered box of 0.875 of the shorter side, shaped like the
    // output.
    const double scale =
        std::min(static_cast<double>(h) / oh, static_cast<double>(w) / ow) *
        spec.eval_crop;
    const double bw = ow * scale, bh = oh * scale;
    return CropBox{(w - bw) / 2, (h - bh) / 2, bw, bh, false};
  }
  return CropBox{0, 0, static_cast<double>(w), static_cast<double>(h), false};
}

void resize_box_into(
    const InterleavedPixels& image,
    const CropBox& box,
    std::uint8_t* dst,
    OutputSize out) {
  const ImageView src{
      image.data, image.c, image.h, image.w, 1, image.row_bytes, image.c};
  resize_into(src, {box.x0, box.y0, box.w, box.h, box.flip}, dst, out.h, out.w);
}

void augment_into(
    const at::Tensor& image,
    std::uint8_t* dst,
    const AugmentSpec& spec,
    std::uint64_t seed) {
  const std::int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  const ImageView src{
      image.data_ptr<std::uint8_t>(),
      c,
      h,
      w,
      image.stride(0),
      image.stride(1),
      image.stride(2)};
  const std::int64_t oh = spec.out_h, ow = spec.out_w;

  if (const auto box = photo_box(spec, seed, h, w)) {
    resize_into(
        src, {box->x0, box->y0, box->w, box->h, box->flip}, dst, oh, ow);
    return;
  }
  if (spec.mode == AugmentSpec::Mode::Train) {
    // Small images: zero padding + random crop at the native size + flip.
    const SmallImageParams p =
        small_image_params(seed, spec.padding, spec.flip);
    for (std::int64_t ch = 0; ch < c; ++ch) {
      for (std::int64_t y = 0; y < oh; ++y) {
        std::uint8_t* out = dst + (ch * oh + y) * ow;
        const std::int64_t sy = y + p.dy;
        for (std::int64_t x = 0; x < ow; ++x) {
          const std::int64_t sx = (p.flip ? ow - 1 - x : x) + p.dx;
          out[x] =
              (sy >= 0 && sy < h && sx >= 0 && sx < w) ? src.at(ch, sy, sx) : 0;
        }
      }
    }
    return;
  }
  // The image is already at the output size: copied.
  if (image.is_contiguous()) {
    std::memcpy(dst, src.data, static_cast<std::size_t>(c * h * w));
    return;
  }
  for (std::int64_t ch = 0; ch < c; ++ch) {
    for (std::int64_t y = 0; y < h; ++y) {
      for (std::int64_t x = 0; x < w; ++x) {
        dst[(ch * h + y) * w + x] = src.at(ch, y, x);
      }
    }
  }
}

} // namespace hotloop::data
