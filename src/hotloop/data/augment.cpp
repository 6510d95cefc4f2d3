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

// The source pixels and weights each output pixel blends along one axis:
// PIL's (and torchvision's antialias=True) bilinear filter. Output pixel x
// sits at center = x0 + (x + 0.5) * scale in source coordinates, scale =
// extent / out; the triangle filter is stretched by max(scale, 1), so a
// downscale averages every source pixel under the output pixel (no
// aliasing) and an upscale is plain bilinear with half-pixel centers. Taps
// outside the image are dropped and the weights renormalized (at the edges
// that equals clamping the coordinate).
struct Taps {
  std::vector<std::int64_t> first; // first source pixel, per output pixel
  std::vector<std::int64_t> count; // taps, per output pixel
  std::vector<float> weights; // out x stride, summing to 1 per output pixel
  std::int64_t stride = 0;
};

Taps make_taps(double x0, double extent, std::int64_t in, std::int64_t out) {
  const double scale = extent / static_cast<double>(out);
  const double stretch = std::max(scale, 1.0);
  const double support = stretch; // the triangle's support is 1
  Taps t;
  t.stride = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  t.weights.assign(static_cast<std::size_t>(out * t.stride), 0.0f);
  for (std::int64_t x = 0; x < out; ++x) {
    const double center = x0 + (static_cast<double>(x) + 0.5) * scale;
    const auto lo = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::floor(center - support + 0.5)),
        0,
        in - 1);
    const auto hi = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::floor(center + support + 0.5)),
        lo + 1,
        in);
    const std::int64_t n = std::min(hi - lo, t.stride);
    double total = 0;
    float* w = t.weights.data() + x * t.stride;
    for (std::int64_t k = 0; k < n; ++k) {
      const double d =
          std::abs((static_cast<double>(lo + k) + 0.5 - center) / stretch);
      const double v = d < 1.0 ? 1.0 - d : 0.0;
      w[k] = static_cast<float>(v);
      total += v;
    }
    if (total <= 0) { // a box narrower than a pixel at the edge: nearest
      w[0] = 1.0f;
      total = 1.0;
    }
    for (std::int64_t k = 0; k < n; ++k) {
      w[k] = static_cast<float>(w[k] / total);
    }
    t.first[x] = lo;
    t.count[x] = n;
  }
  return t;
}

// The horizontal pass of one output row: output pixel x blends `taps`
// columns of the vertically blended row `r` (interleaved, c floats per
// column) from col[x] with weights[x * stride ...], and channel ch goes to
// out[ch * plane + x].
struct RowPass {
  const float* r;
  const std::int64_t* col;
  const float* weights;
  std::int64_t stride;
  std::uint8_t* out;
  std::int64_t plane;
  std::int64_t ow;
};

// Three channels, Taps known at compile time: each tap's pixel is one 4-float
// load (its 3 channels and the next pixel's first, unused), so a pixel's
// channels are blended at once in SSE registers (GCC's vector extensions:
// SSE2, no gathers). `r` has a float of padding after its last pixel for the
// last load.
template <int Taps>
void emit_row_rgb(const RowPass& p) {
  using V4 = float __attribute__((vector_size(16)));
  using I4 = std::int32_t __attribute__((vector_size(16)));
  const V4 zero = {0, 0, 0, 0};
  const V4 top = {255, 255, 255, 255};
  const V4 half = {0.5f, 0.5f, 0.5f, 0.5f};
  for (std::int64_t x = 0; x < p.ow; ++x) {
    const float* wx = p.weights + x * p.stride;
    const float* px = p.r + p.col[x] * 3;
    V4 v = zero;
    for (int k = 0; k < Taps; ++k) {
      V4 tap;
      std::memcpy(&tap, px + k * 3, sizeof(tap));
      v += tap * wx[k];
    }
    v = v < zero ? zero : v;
    v = v > top ? top : v;
    const I4 b = __builtin_convertvector(v + half, I4);
    p.out[x] = static_cast<std::uint8_t>(b[0]);
    p.out[p.plane + x] = static_cast<std::uint8_t>(b[1]);
    p.out[2 * p.plane + x] = static_cast<std::uint8_t>(b[2]);
  }
}

// Any channel count and number of taps, one channel at a time.
void emit_row(const RowPass& p, std::int64_t c, std::int64_t taps) {
  for (std::int64_t ch = 0; ch < c; ++ch) {
    for (std::int64_t x = 0; x < p.ow; ++x) {
      const float* wx = p.weights + x * p.stride;
      const float* px = p.r + p.col[x] * c + ch;
      float v = 0;
      for (std::int64_t k = 0; k < taps; ++k) {
        v += px[k * c] * wx[k];
      }
      // A convex blend of bytes: in [0, 255] up to rounding.
      p.out[ch * p.plane + x] =
          static_cast<std::uint8_t>(static_cast<std::int32_t>(
              std::min(std::max(v, 0.0f), 255.0f) + 0.5f));
    }
  }
}

// Bilinear resize of the `box` region of a (C, H, W) plane stack into (C, oh,
// ow), antialiased when it shrinks (make_taps). `flip` mirrors the output
// horizontally. Vertical pass first: for each output row, its source rows
// are blended over the columns the box needs, in float, a contiguous loop
// the compiler vectorizes (interleaved pixels are one run of bytes); then
// one horizontal pass per output row gathers each output pixel's columns
// from that blended row. (With the reused batch buffer and the vectorized
// normalization, the row-first version without antialiasing ran at 1.48x
// the images/s of the earlier horizontal-first fixed-point one on the photo
// benchmark: the README's loader section.)
void resize_box(
    const Planes& src,
    Box box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow,
    bool flip) {
  const std::int64_t c = src.c, h = src.h, w = src.w;
  Taps tx = make_taps(box.x0, box.w, w, ow);
  const Taps ty = make_taps(box.y0, box.h, h, oh);
  if (flip) {
    // Output pixel x takes the taps of ow - 1 - x.
    Taps f = tx;
    for (std::int64_t x = 0; x < ow; ++x) {
      const std::int64_t m = ow - 1 - x;
      f.first[x] = tx.first[m];
      f.count[x] = tx.count[m];
      std::copy_n(
          tx.weights.data() + m * tx.stride,
          tx.stride,
          f.weights.data() + x * tx.stride);
    }
    tx = std::move(f);
  }
  std::int64_t x_min = w, x_max = 0;
  for (std::int64_t x = 0; x < ow; ++x) {
    x_min = std::min(x_min, tx.first[x]);
    x_max = std::max(x_max, tx.first[x] + tx.count[x] - 1);
  }
  const std::int64_t span = x_max - x_min + 1;
  // Every output pixel gets the same number of taps (zero weights pad the
  // short ones, whose columns stay inside the span): fixed-trip loops.
  std::int64_t kx = 2;
  for (std::int64_t x = 0; x < ow; ++x) {
    kx = std::max(kx, tx.count[x]);
  }
  kx = std::min(kx, span); // a box one pixel wide: one tap
  std::vector<std::int64_t> col(static_cast<std::size_t>(ow));
  for (std::int64_t x = 0; x < ow; ++x) {
    col[x] = std::min(tx.first[x], x_max + 1 - kx) - x_min;
    const std::int64_t shift = tx.first[x] - x_min - col[x];
    float* weights = tx.weights.data() + x * tx.stride;
    if (shift > 0) { // first moved left: move the weights right
      std::copy_backward(
          weights, weights + tx.count[x], weights + tx.count[x] + shift);
      std::fill(weights, weights + shift, 0.0f);
    }
  }
  // One float of padding: emit_row_rgb's last load reads it.
  std::vector<float> row(static_cast<std::size_t>(span * c + 1));
  const bool interleaved = src.sx == c && src.sc == 1;
  for (std::int64_t y = 0; y < oh; ++y) {
    float* r = row.data();
    const float* wy = ty.weights.data() + y * ty.stride;
    for (std::int64_t k = 0; k < ty.count[y]; ++k) {
      const float b = wy[k];
      const std::uint8_t* s =
          src.data + (ty.first[y] + k) * src.sy + x_min * src.sx;
      if (interleaved) {
        if (k == 0) {
          for (std::int64_t i = 0; i < span * c; ++i) {
            r[i] = static_cast<float>(s[i]) * b;
          }
        } else {
          for (std::int64_t i = 0; i < span * c; ++i) {
            r[i] += static_cast<float>(s[i]) * b;
          }
        }
      } else {
        for (std::int64_t x = 0; x < span; ++x) {
          for (std::int64_t ch = 0; ch < c; ++ch) {
            const float v = static_cast<float>(s[x * src.sx + ch * src.sc]) * b;
            r[x * c + ch] = k == 0 ? v : r[x * c + ch] + v;
          }
        }
      }
    }
    const RowPass pass{
        r, col.data(), tx.weights.data(), tx.stride, dst + y * ow, oh * ow, ow};
    if (c != 3) {
      emit_row(pass, c, kx);
      continue;
    }
    switch (kx) { // taps known at compile time: the compiler unrolls them
      case 2:
        emit_row_rgb<2>(pass);
        break;
      case 3:
        emit_row_rgb<3>(pass);
        break;
      case 4:
        emit_row_rgb<4>(pass);
        break;
      case 5:
        emit_row_rgb<5>(pass);
        break;
      default:
        emit_row(pass, c, kx);
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
  const Planes src{
      image.data, image.c, image.h, image.w, 1, image.row_bytes, image.c};
  resize_box(src, {box.x0, box.y0, box.w, box.h}, dst, out.h, out.w, box.flip);
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

  if (const auto box = photo_box(spec, seed, h, w)) {
    resize_box(src, {box->x0, box->y0, box->w, box->h}, dst, oh, ow, box->flip);
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
