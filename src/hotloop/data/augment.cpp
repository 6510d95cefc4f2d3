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
// Separable and fixed-point (10-bit weights): each needed source row is
// interpolated horizontally once into an integer row and reused by the output
// rows that share it, then rows are blended vertically. (The float version with
// std::lround per value ran at ~10 ns per output value; this one is several
// times faster, measured with `hotloop bench data` on the folder benchmark.)
void resize_box(
    const Planes& src,
    Box box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow,
    bool flip) {
  const std::int64_t c = src.c, h = src.h, w = src.w;
  constexpr int kBits = 10;
  constexpr std::int32_t kOne = 1 << kBits;
  std::vector<std::int32_t> x_lo(ow), x_hi(ow), wx(ow);
  for (std::int64_t x = 0; x < ow; ++x) {
    const double sx = std::clamp(
        box.x0 + (x + 0.5) * box.w / ow - 0.5, 0.0, static_cast<double>(w - 1));
    const auto lo = static_cast<std::int32_t>(sx);
    const std::int64_t out_x = flip ? ow - 1 - x : x;
    x_lo[out_x] = lo;
    x_hi[out_x] =
        static_cast<std::int32_t>(std::min<std::int64_t>(lo + 1, w - 1));
    wx[out_x] = static_cast<std::int32_t>((sx - lo) * kOne + 0.5);
  }
  std::vector<std::int32_t> y_lo(oh), y_hi(oh), wy(oh);
  for (std::int64_t y = 0; y < oh; ++y) {
    const double sy = std::clamp(
        box.y0 + (y + 0.5) * box.h / oh - 0.5, 0.0, static_cast<double>(h - 1));
    const auto lo = static_cast<std::int32_t>(sy);
    y_lo[y] = lo;
    y_hi[y] = static_cast<std::int32_t>(std::min<std::int64_t>(lo + 1, h - 1));
    wy[y] = static_cast<std::int32_t>((sy - lo) * kOne + 0.5);
  }
  std::vector<std::int32_t> row_a(ow), row_b(ow);
  const std::int64_t sx = src.sx;
  const auto horizontal = [&](const std::uint8_t* r, std::int32_t* out) {
    for (std::int64_t x = 0; x < ow; ++x) {
      out[x] = r[x_lo[x] * sx] * (kOne - wx[x]) + r[x_hi[x] * sx] * wx[x];
    }
  };
  for (std::int64_t ch = 0; ch < c; ++ch) {
    const std::uint8_t* plane = src.data + ch * src.sc;
    std::int32_t* top = row_a.data();
    std::int32_t* bottom = row_b.data();
    std::int32_t top_row = -1, bottom_row = -1;
    for (std::int64_t y = 0; y < oh; ++y) {
      if (top_row != y_lo[y]) {
        if (bottom_row == y_lo[y]) {
          std::swap(top, bottom);
          std::swap(top_row, bottom_row);
        } else {
          horizontal(plane + static_cast<std::int64_t>(y_lo[y]) * src.sy, top);
          top_row = y_lo[y];
        }
      }
      if (bottom_row != y_hi[y]) {
        horizontal(plane + static_cast<std::int64_t>(y_hi[y]) * src.sy, bottom);
        bottom_row = y_hi[y];
      }
      const std::int32_t b = wy[y], a = kOne - b;
      std::uint8_t* out = dst + (ch * oh + y) * ow;
      for (std::int64_t x = 0; x < ow; ++x) {
        out[x] = static_cast<std::uint8_t>(
            (top[x] * a + bottom[x] * b + (1 << (2 * kBits - 1))) >>
            (2 * kBits));
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
