// hotloop's resize before the fixed-point one (src/hotloop/data/augment.cpp
// at 4ea9514), kept unchanged as the resize benchmark's baseline: the same
// antialiased bilinear filter, blended in float (rows first, the vertical
// pass left to the compiler's vectorizer, the horizontal pass 4 floats at a
// time). Not used by hotloop itself.
#include "resize/float_resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hotloop::bench {
namespace {

using data::ImageView;
using Planes = ImageView;

struct Box {
  double x0, y0, w, h; // in source pixels
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

} // namespace

void float_resize_into(
    const data::ImageView& src,
    const data::ResizeBox& box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow) {
  resize_box(src, {box.x0, box.y0, box.w, box.h}, dst, oh, ow, box.flip);
}

} // namespace hotloop::bench
