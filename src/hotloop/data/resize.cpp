#include "hotloop/data/resize.h"

#include "hotloop/data/resize_kernels.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace hotloop::data {
namespace {

using namespace resize_detail;

// The taps of one axis: output pixel i blends count[i] source pixels from
// first[i] with weights[i * stride ...] (integers summing to 1 << 14).
struct Taps {
  std::vector<std::int64_t> first;
  std::vector<std::int64_t> count;
  std::vector<std::int16_t> weights;
  std::int64_t stride = 0;
};

// Rounds one output pixel's weights (summing to 1) to integers that sum to
// exactly 1 << kWeightBits, none negative: each unit of the rounding's
// remainder goes to the tap that rounding moved furthest the other way, so
// a flat image stays flat and no sum can leave the range the passes hold.
void quantize(const double* w, std::int64_t n, std::int16_t* q) {
  constexpr std::int32_t one = 1 << kWeightBits;
  std::int32_t total = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    q[k] = static_cast<std::int16_t>(std::lround(w[k] * one));
    total += q[k];
  }
  while (total != one) {
    const int step = total < one ? 1 : -1;
    std::int64_t best = -1;
    double best_error = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      if (step < 0 && q[k] == 0) {
        continue;
      }
      const double error = (w[k] * one - q[k]) * step;
      if (best < 0 || error > best_error) {
        best = k;
        best_error = error;
      }
    }
    q[best] = static_cast<std::int16_t>(q[best] + step);
    total += step;
  }
}

// PIL's bilinear filter along one axis. Output pixel x sits at center = x0 +
// (x + 0.5) * scale in source coordinates, scale = extent / out; the
// triangle filter is stretched by max(scale, 1). Taps outside the image are
// dropped and the weights renormalized (at the edges that equals clamping
// the coordinate).
Taps make_taps(double x0, double extent, std::int64_t in, std::int64_t out) {
  const double scale = extent / static_cast<double>(out);
  const double support = std::max(scale, 1.0); // the triangle's support is 1
  Taps t;
  t.stride = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  t.weights.assign(static_cast<std::size_t>(out * t.stride), 0);
  std::vector<double> w(static_cast<std::size_t>(t.stride));
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
    for (std::int64_t k = 0; k < n; ++k) {
      const double d =
          std::abs((static_cast<double>(lo + k) + 0.5 - center) / support);
      w[k] = d < 1.0 ? 1.0 - d : 0.0;
      total += w[k];
    }
    if (total <= 0) { // a box narrower than a pixel at the edge: nearest
      w[0] = 1.0;
      total = 1.0;
    }
    for (std::int64_t k = 0; k < n; ++k) {
      w[k] /= total;
    }
    quantize(w.data(), n, t.weights.data() + x * t.stride);
    t.first[x] = lo;
    t.count[x] = n;
  }
  return t;
}

Taps mirrored(const Taps& t) {
  Taps f = t;
  const auto out = static_cast<std::int64_t>(t.first.size());
  for (std::int64_t x = 0; x < out; ++x) {
    const std::int64_t m = out - 1 - x;
    f.first[x] = t.first[m];
    f.count[x] = t.count[m];
    std::copy_n(
        t.weights.data() + m * t.stride,
        t.stride,
        f.weights.data() + x * t.stride);
  }
  return f;
}

// The horizontal taps laid out for the kernels: every output pixel gets the
// same even number of taps (zero weights pad the short ones), its columns
// counted from x_min, the first column of the span the row pass blends.
struct RowTaps {
  std::int64_t x_min = 0, span = 0;
  int taps = 0;
  std::vector<std::int32_t> col;
  std::vector<std::int16_t> weights;
};

RowTaps row_taps(const Taps& tx) {
  const auto ow = static_cast<std::int64_t>(tx.first.size());
  RowTaps r;
  std::int64_t x_max = 0, kx = 1;
  r.x_min = tx.first[0];
  for (std::int64_t x = 0; x < ow; ++x) {
    r.x_min = std::min(r.x_min, tx.first[x]);
    x_max = std::max(x_max, tx.first[x] + tx.count[x] - 1);
    kx = std::max(kx, tx.count[x]);
  }
  r.span = x_max - r.x_min + 1;
  kx = std::min(kx, r.span); // real taps stay inside the span
  r.taps = static_cast<int>(kx + (kx & 1)); // the padding tap reads column
  r.col.resize(static_cast<std::size_t>(ow)); // span at most: zero weight
  r.weights.assign(static_cast<std::size_t>(ow * r.taps), 0);
  for (std::int64_t x = 0; x < ow; ++x) {
    const std::int64_t col = std::min(tx.first[x], x_max + 1 - kx);
    const std::int64_t shift = tx.first[x] - col;
    r.col[x] = static_cast<std::int32_t>(col - r.x_min);
    std::copy_n(
        tx.weights.data() + x * tx.stride,
        tx.count[x],
        r.weights.data() + x * r.taps + shift);
  }
  return r;
}

// The vertical pass for a source that is not interleaved: the same sums,
// read with strides, written interleaved.
void vertical_strided(
    const ImageView& src,
    std::int64_t first_row,
    const std::int16_t* w,
    std::int64_t taps,
    std::int64_t x_min,
    std::int64_t span,
    std::int16_t* out) {
  for (std::int64_t x = 0; x < span; ++x) {
    for (std::int64_t ch = 0; ch < src.c; ++ch) {
      std::int32_t acc = 1 << (kVerticalShift - 1);
      for (std::int64_t k = 0; k < taps; ++k) {
        acc += src.at(ch, first_row + k, x_min + x) * w[k];
      }
      out[x * src.c + ch] = static_cast<std::int16_t>(acc >> kVerticalShift);
    }
  }
}

Kernels kernels_for(ResizeKernel kernel) {
  switch (kernel == ResizeKernel::Best ? best_resize_kernel() : kernel) {
#if defined(__x86_64__)
    case ResizeKernel::Sse2:
      return sse2_kernels();
    case ResizeKernel::Avx2:
      if (!resize_kernel_available(kernel)) {
        throw std::invalid_argument("resize: this CPU has no AVX2");
      }
      return avx2_kernels();
#endif
    case ResizeKernel::Scalar:
      return scalar_kernels();
    default:
      throw std::invalid_argument(
          "resize: no " + std::string(resize_kernel_name(kernel)) +
          " kernel on this CPU");
  }
}

} // namespace

bool resize_kernel_available(ResizeKernel kernel) {
  switch (kernel) {
    case ResizeKernel::Best:
    case ResizeKernel::Scalar:
      return true;
#if defined(__x86_64__)
    case ResizeKernel::Sse2:
      return true; // part of x86-64 itself
    case ResizeKernel::Avx2:
      return __builtin_cpu_supports("avx2") != 0;
#endif
    default:
      return false;
  }
}

ResizeKernel best_resize_kernel() {
  for (const ResizeKernel k : {ResizeKernel::Avx2, ResizeKernel::Sse2}) {
    if (resize_kernel_available(k)) {
      return k;
    }
  }
  return ResizeKernel::Scalar;
}

std::string_view resize_kernel_name(ResizeKernel kernel) {
  switch (kernel) {
    case ResizeKernel::Best:
      return "best";
    case ResizeKernel::Scalar:
      return "scalar";
    case ResizeKernel::Sse2:
      return "sse2";
    case ResizeKernel::Avx2:
      return "avx2";
  }
  return "?";
}

// Vertical pass first: for each output row its source rows are blended over
// the columns the box needs (interleaved pixels are one run of bytes, which
// the vector kernels take 16 or 32 at a time); then the horizontal pass
// gathers each output pixel's columns from that row.
void resize_into(
    const ImageView& src,
    const ResizeBox& box,
    std::uint8_t* dst,
    std::int64_t oh,
    std::int64_t ow,
    ResizeKernel kernel) {
  const Kernels k = kernels_for(kernel);
  const std::int64_t c = src.c;
  Taps tx = make_taps(box.x0, box.w, src.w, ow);
  if (box.flip) { // output pixel x takes the taps of ow - 1 - x
    tx = mirrored(tx);
  }
  const Taps ty = make_taps(box.y0, box.h, src.h, oh);
  const RowTaps rt = row_taps(tx);
  // Padding past the span: the padding tap's column and the 4-value loads
  // of the last pixels read it.
  std::vector<std::int16_t> row(
      static_cast<std::size_t>((rt.span + 2) * c + 4));
  std::vector<const std::uint8_t*> rows(static_cast<std::size_t>(ty.stride));
  const bool interleaved = src.sx == c && src.sc == 1;
  for (std::int64_t y = 0; y < oh; ++y) {
    const std::int16_t* wy = ty.weights.data() + y * ty.stride;
    if (interleaved) {
      for (std::int64_t t = 0; t < ty.count[y]; ++t) {
        rows[t] = src.data + (ty.first[y] + t) * src.sy + rt.x_min * c;
      }
      k.vertical(
          rows.data(),
          wy,
          static_cast<int>(ty.count[y]),
          rt.span * c,
          row.data());
    } else {
      vertical_strided(
          src, ty.first[y], wy, ty.count[y], rt.x_min, rt.span, row.data());
    }
    k.horizontal(
        {row.data(),
         rt.col.data(),
         rt.weights.data(),
         rt.taps,
         ow,
         c,
         dst + y * ow,
         oh * ow});
  }
}

namespace resize_detail {

void vertical_scalar_columns(
    const std::uint8_t* const* rows,
    const std::int16_t* weights,
    int taps,
    std::int64_t begin,
    std::int64_t n,
    std::int16_t* out) {
  for (std::int64_t i = begin; i < n; ++i) {
    std::int32_t acc = 1 << (kVerticalShift - 1);
    for (int k = 0; k < taps; ++k) {
      acc += rows[k][i] * weights[k];
    }
    out[i] = static_cast<std::int16_t>(acc >> kVerticalShift);
  }
}

namespace {

void vertical_scalar(
    const std::uint8_t* const* rows,
    const std::int16_t* weights,
    int taps,
    std::int64_t n,
    std::int16_t* out) {
  vertical_scalar_columns(rows, weights, taps, 0, n, out);
}

} // namespace

void horizontal_scalar(const HorizontalRow& p) {
  for (std::int64_t ch = 0; ch < p.c; ++ch) {
    for (std::int64_t x = 0; x < p.ow; ++x) {
      const std::int16_t* px = p.row + p.col[x] * p.c + ch;
      const std::int16_t* wx = p.weights + x * p.taps;
      std::int32_t acc = 1 << (kHorizontalShift - 1);
      for (int k = 0; k < p.taps; ++k) {
        acc += px[k * p.c] * wx[k];
      }
      p.out[ch * p.plane + x] = static_cast<std::uint8_t>(
          std::clamp(acc >> kHorizontalShift, 0, 255));
    }
  }
}

Kernels scalar_kernels() {
  return {vertical_scalar, horizontal_scalar};
}

} // namespace resize_detail
} // namespace hotloop::data
