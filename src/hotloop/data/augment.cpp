#include "hotloop/data/augment.h"

#include "hotloop/core/random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

// A (C, H, W) uint8 image with any strides (in elements): planar, or
// interleaved (H, W, C) as the decoders produce it, read without a copy.
struct Planes {
  const std::uint8_t* data;
  std::int64_t c, h, w;
  std::int64_t sc, sy, sx;
  std::uint8_t at(std::int64_t ch, std::int64_t y, std::int64_t x) const {
    return data[ch * sc + y * sy + x * sx];
  }
};

// Bilinear resize of the `box` region of a (C, H, W) plane stack into (C, oh,
// ow), with half-pixel centers as torchvision's
// interpolate(align_corners=False). `flip` mirrors the output horizontally.
// Vertical pass first: for each output row, the two source rows it lies
// between are blended over the columns the box needs, in float, a
// contiguous loop the compiler vectorizes (interleaved pixels are one run of
// bytes); then one horizontal pass per output row gathers the two columns of
// each output pixel from that blended row. Each output value costs one
// gather-and-blend, not the two of a horizontal-first pass that downscales.
// (With the reused batch buffer and the vectorized normalization, 1.48x the
// images/s of the previous, horizontal-first fixed-point version on the photo
// benchmark: the README's loader section.)
void resize_box(
    const Planes& src,
    Box box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow,
    bool flip) {
  const std::int64_t c = src.c, h = src.h, w = src.w;
  std::vector<std::int64_t> x_lo(ow), x_hi(ow);
  std::vector<float> wx(ow);
  std::int64_t x_min = w, x_max = 0;
  for (std::int64_t x = 0; x < ow; ++x) {
    const double sx = std::clamp(
        box.x0 + (x + 0.5) * box.w / ow - 0.5, 0.0, static_cast<double>(w - 1));
    const auto lo = static_cast<std::int64_t>(sx);
    const std::int64_t out_x = flip ? ow - 1 - x : x;
    x_lo[out_x] = lo;
    x_hi[out_x] = std::min<std::int64_t>(lo + 1, w - 1);
    wx[out_x] = static_cast<float>(sx - static_cast<double>(lo));
    x_min = std::min(x_min, lo);
    x_max = std::max(x_max, x_hi[out_x]);
  }
  const std::int64_t span = x_max - x_min + 1;
  // Column offsets into the blended row, which holds [x][channel].
  for (std::int64_t x = 0; x < ow; ++x) {
    x_lo[x] = (x_lo[x] - x_min) * c;
    x_hi[x] = (x_hi[x] - x_min) * c;
  }
  std::vector<float> row(static_cast<std::size_t>(span * c));
  const bool interleaved = src.sx == c && src.sc == 1;
  for (std::int64_t y = 0; y < oh; ++y) {
    const double sy = std::clamp(
        box.y0 + (y + 0.5) * box.h / oh - 0.5, 0.0, static_cast<double>(h - 1));
    const auto lo = static_cast<std::int64_t>(sy);
    const std::int64_t hi = std::min<std::int64_t>(lo + 1, h - 1);
    const float b = static_cast<float>(sy - static_cast<double>(lo));
    const std::uint8_t* top = src.data + lo * src.sy + x_min * src.sx;
    const std::uint8_t* bottom = src.data + hi * src.sy + x_min * src.sx;
    float* r = row.data();
    if (interleaved) {
      for (std::int64_t k = 0; k < span * c; ++k) {
        const float t = top[k];
        r[k] = t + (static_cast<float>(bottom[k]) - t) * b;
      }
    } else {
      for (std::int64_t x = 0; x < span; ++x) {
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const std::int64_t at = x * src.sx + ch * src.sc;
          const float t = top[at];
          r[x * c + ch] = t + (static_cast<float>(bottom[at]) - t) * b;
        }
      }
    }
    for (std::int64_t ch = 0; ch < c; ++ch) {
      std::uint8_t* out = dst + (ch * oh + y) * ow;
      const float* rc = r + ch;
      for (std::int64_t x = 0; x < ow; ++x) {
        const float l = rc[x_lo[x]];
        // In [0, 255]: a blend of bytes. + 0.5 and truncation round it.
        out[x] = static_cast<std::uint8_t>(
            static_cast<std::int32_t>(l + (rc[x_hi[x]] - l) * wx[x] + 0.5f));
      }
    }
  }
}

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

void augment_into(
    const at::Tensor& image,
    std::uint8_t* dst,
    const AugmentSpec& spec,
    std::uint64_t seed) {
  const std::int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  const Planes src{
      image.data_ptr<std::uint8_t>(),
      c,
      h,
      w,
      image.stride(0),
      image.stride(1),
      image.stride(2)};
  const std::int64_t oh = spec.out_h, ow = spec.out_w;
  Rng rng{seed};

  if (spec.mode == AugmentSpec::Mode::Train && spec.small_images) {
    // Zero padding + random crop at the native size + flip.
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
  if (spec.mode == AugmentSpec::Mode::Train) {
    const Box box = random_resized_crop(h, w, rng);
    const bool flip = spec.flip && (rng.next() & 1) != 0;
    resize_box(src, box, dst, oh, ow, flip);
    return;
  }
  if (h == oh && w == ow) {
    if (image.is_contiguous()) {
      std::memcpy(dst, src.data, static_cast<std::size_t>(c * h * w));
    } else {
      for (std::int64_t ch = 0; ch < c; ++ch) {
        for (std::int64_t y = 0; y < h; ++y) {
          for (std::int64_t x = 0; x < w; ++x) {
            dst[(ch * h + y) * w + x] = src.at(ch, y, x);
          }
        }
      }
    }
    return;
  }
  if (spec.mode == AugmentSpec::Mode::Eval && !spec.small_images) {
    // Resize the shorter side to out/0.875, then center crop out: in source
    // pixels, a centered box of 0.875 of the shorter side, shaped like the
    // output.
    const double scale =
        std::min(static_cast<double>(h) / oh, static_cast<double>(w) / ow) *
        spec.eval_crop;
    const double bw = ow * scale, bh = oh * scale;
    resize_box(src, {(w - bw) / 2, (h - bh) / 2, bw, bh}, dst, oh, ow, false);
    return;
  }
  resize_box(
      src,
      {0, 0, static_cast<double>(w), static_cast<double>(h)},
      dst,
      oh,
      ow,
      false);
}

} // namespace hotloop::data
